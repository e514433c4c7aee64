// REVIEW (not part of the suite): CHAIN_LOGS_QUORUM=2 over two URLs, one honest. The quorum is
// asked only for eth_getLogs; the head and every block header come from the lead alone. A liar
// (a proxy in front of the same honest node, so every eth_getLogs it answers is the truth) that
// (1) gets itself made lead by hiding one log once (the rotation after InconsistentLogsError
// promotes the next URL, i.e. the liar itself when it is listed second), then (2) answers a head K
// blocks above the real one with made-up headers for the blocks that do not exist yet, moves the
// cursor past blocks not mined yet: both voters answer the same (empty) logs for them. It then
// only has to serve its made-up header for the cursor's block once; the real payment mined in
// those blocks is never read. No InconsistentLogsError is ever raised during the attack.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWalletClient, http, keccak256, maxUint256, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FEE_PROXY_ABI } from '../../src/chain/abi.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { loadChains } from '../../src/chains-config.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { startRpcProxy, startTestChain, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let honest: RpcProxy;
let liar: RpcProxy;
let metrics: ReturnType<typeof createMetrics>;
let run: () => Promise<string>;
let wallet: ReturnType<typeof createWalletClient>;
const api = apiClient(() => fx.api.app);
const keyA = () => fx.merchant.keys.sandbox;
const merchantA = privateKeyToAccount(generatePrivateKey()).address;
const outcomes: string[] = [];

async function cursor(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ b: string }>('select block_number::text as b from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].b) : -1n;
}
const head = () => chain.publicClient.getBlockNumber({ cacheTime: 0 });
/** Runs (through back-offs and failures) until the cursor reaches `target`. */
async function runUntil(target: bigint, timeoutMs = 30_000): Promise<void> {
  await waitUntil(async () => {
    if ((await cursor()) >= target) return true;
    outcomes.push(await run().catch((e: Error) => `threw: ${e.message.split('\n')[0]}`));
    return (await cursor()) >= target;
  }, timeoutMs, 20);
}
async function sent(amount: string): Promise<JsonBody> {
  const c = await api.post('/v1/invoices', keyA(), { customer_email: `p-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(c.status, c.raw).toBe(200);
  const s = await api.post(`/v1/invoices/${c.body.data.id}/send`, keyA());
  expect(s.status, s.raw).toBe(200);
  return s.body.data;
}
const inv = async (id: string) => (await api.get(`/v1/invoices/${id}`, keyA())).body.data;
async function lies(): Promise<number> {
  const m = await metrics.registry.getSingleMetric('chain_scan_failures_total')?.get();
  return m?.values.find((v) => v.labels.cause === 'inconsistent_logs')?.value ?? 0;
}

beforeAll(async () => {
  chain = await startTestChain();
  honest = await startRpcProxy(chain.rpcUrl);
  liar = await startRpcProxy(chain.rpcUrl);
  const dir = mkdtempSync(path.join(tmpdir(), 'zz-review-quorum-'));
  fx = await startApiFixture({ CHAINS_FILE: chain.writeChainsFile(dir), RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', keyA(), { settlement_address: merchantA })).status).toBe(200);
  // The honest URL is listed FIRST: the liar starts as the second voter, not the lead.
  const file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'zz-review-quorum-2-')), { rpc_urls: [honest.url, liar.url] });
  metrics = createMetrics({ queues: [], db: fx.api.pool, defaultMetrics: false });
  const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log: createLogger('silent'), metrics: metrics.chain, logsQuorum: 2 });
  run = () => watcher.run(chain.chainId);
  wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  await wallet.writeContract({ account: chain.payers[0].address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.feeProxy, maxUint256] });
  await chain.mine(5);
  await runUntil((await head()) - 2n);
}, 180_000);
afterAll(async () => {
  if (process.env.REVIEW_VERBOSE) console.log(outcomes.join("\n"));
  await fx?.close();
  await honest?.close();
  await liar?.close();
  await chain?.stop();
});

describe('REVIEW: CHAIN_LOGS_QUORUM=2, two URLs, the second one lying about the head only', () => {
  it('a real, full payment is skipped for good; no eth_getLogs answer ever differs after the one that made the liar lead', async () => {
    const total = 25_000_000n;
    const i = await sent('25.00');

    // (1) The liar hides one real plain transfer once: the quorum refuses the run, and the
    // rotation makes the NEXT url (the liar) the lead.
    const bait = await wallet.writeContract({ account: chain.payers[1].address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'transfer', args: [merchantA, 1_000_000n], gas: 100_000n });
    await chain.publicClient.waitForTransactionReceipt({ hash: bait });
    liar.rewrite(async (req, real) => {
      if (req.method !== 'eth_getLogs') return undefined;
      const ans = await real();
      if (!Array.isArray(ans.result)) return ans;
      return { ...ans, result: (ans.result as { transactionHash: string }[]).filter((l) => l.transactionHash.toLowerCase() !== bait.toLowerCase()) };
    });
    await chain.mine(3);
    await expect(run()).rejects.toThrow(/answered different logs/);
    const liesAfterPromotion = await lies();
    liar.rewrite(null);
    liar.resetCalls();
    honest.resetCalls();
    await runUntil((await head()) - 2n);
    // The liar now answers eth_blockNumber (it leads); the honest URL is asked none.
    expect(liar.calls('eth_blockNumber')).toBeGreaterThan(0);
    expect(honest.calls('eth_blockNumber')).toBe(0);

    // (2) The liar answers a head K blocks above the real one, with made-up headers above it.
    const R = await head();
    const K = 40n;
    const latest = (await chain.publicClient.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as Record<string, unknown>;
    const fakeHash = (n: bigint) => keccak256(toHex(`review-fake-block-${n}`));
    const fakeBlock = (n: bigint) => ({
      ...latest,
      number: toHex(n),
      hash: fakeHash(n),
      parentHash: n === R + 1n ? latest.hash : fakeHash(n - 1n),
      timestamp: toHex(BigInt(latest.timestamp as string) + (n - R)),
    });
    let lyingAbove: bigint | null = R; // headers above this number are made up
    let lyingAt: bigint | null = null; // and, later, this one only
    let lieHead = true;
    liar.rewrite((req) => {
      if (req.method === 'eth_blockNumber' && lieHead) return { jsonrpc: '2.0', id: req.id ?? null, result: toHex(R + 2n + K) };
      if (req.method === 'eth_getBlockByNumber' && typeof req.params?.[0] === 'string' && (req.params[0] as string).startsWith('0x')) {
        const n = BigInt(req.params[0] as string);
        if ((lyingAbove !== null && n > lyingAbove) || n === lyingAt) return { jsonrpc: '2.0', id: req.id ?? null, result: fakeBlock(n) };
      }
      return undefined;
    });
    await waitUntil(async () => {
      outcomes.push(await run().catch((e: Error) => `threw: ${e.message.split('\n')[0]}`));
      return (await cursor()) > R;
    }, 10_000, 50);
    const F = await cursor();
    expect(F, 'the cursor is past the real head: blocks not mined yet are "scanned"').toBe(R + K);
    expect(await head(), 'nothing was mined meanwhile').toBe(R);
    expect(await lies(), 'no answer of the quorum differed').toBe(liesAfterPromotion);

    // (3) The liar stops lying about the head; it serves its made-up header for block F only.
    lieHead = false;
    lyingAbove = null;
    lyingAt = F;
    const ref = i.payment_instructions.payment_reference as Hex;
    const pay = await wallet.writeContract({
      account: chain.payers[0].address, chain: null, address: chain.feeProxy, abi: FEE_PROXY_ABI,
      functionName: 'transferFromWithReferenceAndFee', args: [chain.token, merchantA as Address, total, ref, 0n, chain.feeAddress], gas: 200_000n,
    });
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: pay });
    expect(receipt.status).toBe('success');
    expect(receipt.blockNumber > R && receipt.blockNumber <= F, 'the payment is in a block the cursor already passed').toBe(true);
    await chain.mine(Number(K) + 5);
    await runUntil((await head()) - 2n);
    expect(await cursor()).toBeGreaterThan(F);

    // (4) The liar is fully honest from now on: nothing brings the payment back.
    liar.rewrite(null);
    await chain.mine(5);
    await runUntil((await head()) - 2n);
    await chain.mine(5);
    await runUntil((await head()) - 2n);
    expect(await lies(), 'still no answer of the quorum differed').toBe(liesAfterPromotion);
    const { rows } = await fx.api.pool.query('select id from payments where lower(tx_hash) = lower($1)', [pay]);
    expect(rows, 'the payment was never recorded').toEqual([]);
    expect(await inv(i.id), 'a real, full payment of the invoice, confirmed long ago').toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect(await chain.balanceOf(merchantA)).toBeGreaterThanOrEqual(total);
  }, 120_000);
});
