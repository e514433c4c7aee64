// The chain harness itself (test/helpers/anvil.ts): what the detector's tests will lean on must do
// what it says against a real anvil: the proxy payment's event and topic, plain transfers,
// snapshots, reorgs that really drop a log, and the RPC proxy's counting, refusals and outages.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPublicClient, getAddress, http, keccak256, parseEventLogs, toEventSelector, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { MERCHANT_ACCOUNT_INDEX, WELL_KNOWN_ACCOUNTS } from '../../src/devchain/accounts.js';
import { FEE_PROXY_ABI } from '../../src/chain/abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { startRpcProxy, startTestChain, type RpcProxy, type TestChain } from '../helpers/anvil.js';

const MERCHANT: Address = '0x1111111111111111111111111111111111111111';
const PAYMENT_EVENT = FEE_PROXY_ABI.find((item) => item.type === 'event' && item.name === 'TransferWithReferenceAndFee');
if (!PAYMENT_EVENT || PAYMENT_EVENT.type !== 'event') throw new Error('event missing from the ABI');

async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('test chain (automine)', () => {
  let chain: TestChain;
  beforeAll(async () => {
    chain = await startTestChain();
  });
  afterAll(async () => {
    await chain?.stop();
  });

  it('deploys the proxy, a 6-decimal USDC and the SubscriptionManager at deterministic addresses and funds 8 payers, not the demo merchant or the fee address', async () => {
    expect(chain.chainId).toBe(31337);
    expect(await chain.publicClient.getChainId()).toBe(31337);
    // CREATE addresses of account 0's nonces 0, 1 and 2: the same on every fresh anvil.
    expect(chain.feeProxy).toBe('0x5FbDB2315678afecb367f032d93F642f64180aa3');
    expect(chain.token).toBe('0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512');
    expect(chain.subscriptionManager).toBe('0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0');
    expect(await chain.publicClient.readContract({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'MAX_FEE_BPS' })).toBe(1000);
    expect(await chain.publicClient.readContract({ address: chain.token, abi: TEST_USDC_ABI, functionName: 'decimals' })).toBe(6);
    expect(await chain.publicClient.readContract({ address: chain.token, abi: TEST_USDC_ABI, functionName: 'symbol' })).toBe('USDC');
    expect(chain.tokenDecimals).toBe(6);
    expect(chain.payers).toHaveLength(8);
    expect(chain.payers.map((p) => p.address)).not.toContain(chain.feeAddress);
    expect(chain.payers.map((p) => p.address)).not.toContain(WELL_KNOWN_ACCOUNTS[MERCHANT_ACCOUNT_INDEX].address);
    expect(chain.feeAddress).toBe('0xa0Ee7A142d267C1f36714E4a8F75612F20a79720');
    for (const payer of [chain.payers[0], chain.payers[7]]) expect(await chain.balanceOf(payer.address)).toBe(1_000_000_000_000n);
    expect(await chain.balanceOf(chain.feeAddress)).toBe(0n);
    expect(await chain.balanceOf(WELL_KNOWN_ACCOUNTS[MERCHANT_ACCOUNT_INDEX].address)).toBe(0n);
  });

  it('a payment with a reference emits TransferWithReferenceAndFee with topic keccak256(reference); approve only when short', async () => {
    const reference = '0x0123456789abcdef';
    const payer = chain.payers[1].address;
    const nonceBefore = await chain.publicClient.getTransactionCount({ address: payer });
    const merchantBefore = await chain.balanceOf(MERCHANT);
    const feeBefore = await chain.balanceOf(chain.feeAddress);

    const paid = await chain.payWithReference({ from: payer, to: MERCHANT, amountAtomic: 99_000_000n, feeAtomic: 1_000_000n, reference });

    expect(await chain.publicClient.getTransactionCount({ address: payer })).toBe(nonceBefore + 2); // approve + pay
    const logs = await chain.publicClient.getLogs({
      address: chain.feeProxy,
      event: PAYMENT_EVENT,
      args: { paymentReference: reference },
      fromBlock: paid.blockNumber,
      toBlock: paid.blockNumber,
    });
    expect(logs).toHaveLength(1);
    const [log] = logs;
    expect(log.topics[0]).toBe(toEventSelector(PAYMENT_EVENT));
    expect(log.topics[1]).toBe(keccak256(reference));
    expect(log.transactionHash).toBe(paid.txHash);
    expect(log.logIndex).toBe(paid.logIndex);
    expect(log.args).toMatchObject({
      tokenAddress: chain.token,
      to: getAddress(MERCHANT),
      amount: 99_000_000n,
      feeAmount: 1_000_000n,
      feeAddress: chain.feeAddress,
    });
    expect(await chain.balanceOf(MERCHANT)).toBe(merchantBefore + 99_000_000n);
    expect(await chain.balanceOf(chain.feeAddress)).toBe(feeBefore + 1_000_000n);

    // The allowance (max) is there now: the second payment is one transaction.
    await chain.payWithReference({ from: payer, to: MERCHANT, amountAtomic: 1n, feeAtomic: 0n, reference: '0x00000000000000ff' });
    expect(await chain.publicClient.getTransactionCount({ address: payer })).toBe(nonceBefore + 3);
  });

  it('a plain transfer returns its Transfer log', async () => {
    const sent = await chain.transfer({ from: chain.payers[2].address, to: MERCHANT, amountAtomic: 12_340_000n });
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: sent.txHash });
    const [log] = parseEventLogs({ abi: TEST_USDC_ABI, eventName: 'Transfer', logs: receipt.logs });
    expect(log.logIndex).toBe(sent.logIndex);
    expect(log.args).toEqual({ from: chain.payers[2].address, to: getAddress(MERCHANT), value: 12_340_000n });
    expect(receipt.blockNumber).toBe(sent.blockNumber);
  });

  it('mine, snapshot and revert', async () => {
    const start = await chain.publicClient.getBlockNumber();
    await chain.mine(5);
    expect(await chain.publicClient.getBlockNumber()).toBe(start + 5n);
    const id = await chain.snapshot();
    const before = await chain.balanceOf(MERCHANT);
    await chain.transfer({ to: MERCHANT, amountAtomic: 5n });
    expect(await chain.balanceOf(MERCHANT)).toBe(before + 5n);
    await chain.revert(id);
    expect(await chain.balanceOf(MERCHANT)).toBe(before);
    expect(await chain.publicClient.getBlockNumber()).toBe(start + 5n);
  });

  it('reorg replaces the head block: its payment log and receipt are gone, the height stays', async () => {
    const reference = '0xfeedfacecafebeef';
    const paid = await chain.payWithReference({ from: chain.payers[3].address, to: MERCHANT, amountAtomic: 10n, feeAtomic: 1n, reference });
    const head = await chain.publicClient.getBlockNumber();
    expect(paid.blockNumber).toBe(head);
    const hashBefore = (await chain.publicClient.getBlock({ blockNumber: head })).hash;
    const query = { address: chain.feeProxy, event: PAYMENT_EVENT, args: { paymentReference: reference }, fromBlock: head, toBlock: head } as const;
    expect(await chain.publicClient.getLogs(query)).toHaveLength(1);

    await chain.reorg(1);

    expect(await chain.publicClient.getBlockNumber()).toBe(head);
    expect((await chain.publicClient.getBlock({ blockNumber: head })).hash).not.toBe(hashBefore);
    expect(await chain.publicClient.getLogs(query)).toHaveLength(0);
    expect(await rejectionOf(chain.publicClient.getTransactionReceipt({ hash: paid.txHash }))).toMatchObject({ name: 'TransactionReceiptNotFoundError' });
  });

  it('chainsFileEntry / writeChainsFile: the CHAINS_FILE contract, EIP-55, overrides applied', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'chains-'));
    try {
      const file = chain.writeChainsFile(dir, { confirmations: 5 });
      expect(file).toBe(path.join(dir, 'chains.json'));
      expect(JSON.parse(await readFile(file, 'utf8'))).toEqual([
        {
          chain_id: 31337,
          network: 'local',
          environment: 'sandbox',
          rpc_urls: [chain.rpcUrl],
          confirmations: 5,
          fee_proxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
          fee_address: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
          subscription_manager: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0',
          start_block: 0,
          explorer_url: null,
          tokens: [{ currency: 'USDC', address: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512', decimals: 6 }],
        },
      ]);
      expect(chain.chainsFileEntry().confirmations).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe('rpc proxy', () => {
    let proxy: RpcProxy;
    beforeAll(async () => {
      proxy = await startRpcProxy(chain.rpcUrl, { maxLogRange: 50 });
    });
    afterAll(async () => {
      await proxy?.close();
    });

    const raw = async (body: unknown) => {
      const res = await fetch(proxy.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: res.status === 200 ? ((await res.json()) as unknown) : await res.text() };
    };

    it('forwards, counts calls per method, and refuses an eth_getLogs range wider than 50 blocks', async () => {
      await chain.mine(60);
      proxy.resetCalls();
      const client = createPublicClient({ transport: http(proxy.url, { retryCount: 0 }) });
      const head = await client.getBlockNumber();
      expect(await client.getLogs({ address: chain.feeProxy, fromBlock: head - 49n, toBlock: head })).toEqual([]);
      const refused = await rejectionOf(client.getLogs({ address: chain.feeProxy, fromBlock: head - 50n, toBlock: head }));
      expect(refused).toMatchObject({ code: -32005 });
      expect(String((refused as Error).message)).toContain('query exceeds max block range 50');
      // No fromBlock/toBlock: both mean latest, one block.
      await client.getLogs({ address: chain.feeProxy });
      // From earliest to latest: the whole chain, refused.
      expect(await rejectionOf(client.getLogs({ address: chain.feeProxy, fromBlock: 'earliest', toBlock: 'latest' }))).toMatchObject({ code: -32005 });
      expect(proxy.calls('eth_getLogs')).toBe(4);
      expect(proxy.refusedLogRanges()).toBe(2);
      expect(proxy.calls('eth_blockNumber')).toBe(1);
      expect(proxy.calls()).toBe(5);
    });

    it('handles a batch: counts each item, refuses only the wide eth_getLogs, keeps the order', async () => {
      proxy.resetCalls();
      const { status, body } = await raw([
        { jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', id: 8, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x64' }] },
        { jsonrpc: '2.0', id: 9, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0x1' }] },
      ]);
      expect(status).toBe(200);
      expect(body).toEqual([
        { jsonrpc: '2.0', id: 7, result: '0x7a69' },
        { jsonrpc: '2.0', id: 8, error: { code: -32005, message: 'query exceeds max block range 50' } },
        { jsonrpc: '2.0', id: 9, result: expect.any(Array) },
      ]);
      expect(proxy.calls('eth_getLogs')).toBe(2);
      expect(proxy.calls('eth_chainId')).toBe(1);
    });

    it('goes down (connection refused, or 503) and comes back on the same port', async () => {
      const ping = { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] };
      await proxy.down();
      // A kept-alive connection is cut ("other side closed"); a new one is refused.
      expect(['ECONNREFUSED', 'UND_ERR_SOCKET']).toContain(((await rejectionOf(raw(ping))) as { cause?: { code?: string } }).cause?.code);
      expect(await rejectionOf(raw(ping))).toMatchObject({ cause: { code: 'ECONNREFUSED' } });
      await proxy.up();
      expect((await raw(ping)).body).toMatchObject({ result: '0x7a69' });
      await proxy.down('http503');
      expect((await raw(ping)).status).toBe(503);
      await proxy.up();
      expect((await raw(ping)).status).toBe(200);
    });
  });
});

describe('test chain with a block time', () => {
  let chain: TestChain;
  beforeAll(async () => {
    chain = await startTestChain({ blockTime: 1 });
  });
  afterAll(async () => {
    await chain?.stop();
  });

  it('pays with approve and payment in the same block (interval mining, no automine)', async () => {
    const paid = await chain.payWithReference({ to: MERCHANT, amountAtomic: 3n, feeAtomic: 1n, reference: '0x1111222233334444' });
    const block = await chain.publicClient.getBlock({ blockNumber: paid.blockNumber });
    expect(block.transactions).toHaveLength(2);
    expect(await chain.balanceOf(MERCHANT)).toBe(3n);
  });
});
