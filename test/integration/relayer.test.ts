// The relayer (src/chain/relayer.ts) on a real chain (anvil) and a real Postgres: a charge
// simulated, sent and mined; two relayers with pools of their own sharing one key get distinct,
// consecutive nonces; a relayer that dies between recording and broadcasting leaves a transaction
// the next one broadcasts (one charge); a transaction stuck under a rising base fee is replaced,
// same nonce, higher fees; simulateCharge says why a charge would fail in the customer's terms;
// no gas is the operator's error; the key file's mode is checked; the key is in no log line.
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { createWalletClient, http, parseEventLogs, parseGwei, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createRelayer, RelayerCallRefused, RelayerNotConfigured, RelayerOutOfGas, RelayerUnavailable, type Relayer, type RelayerOptions } from '../../src/chain/relayer.js';
import { loadRelayerKeys, LOCAL_RELAYER_KEY_FILE, RelayerKeyError } from '../../src/chain/relayer-keys.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { relayerTransactionsOf } from '../../src/db/relayer-transactions.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import type { Chain } from '../../src/domain/chains.js';
import { Secret } from '../../src/lib/secret.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { withoutUnsent } from '../helpers/relayer-rows.js';
import { startRpcProxy, startTestChain, type TestChain } from '../helpers/anvil.js';
import { spawnWorker } from '../helpers/worker.js';
import { createTestDatabase, type TestDatabase } from '../helpers/context.js';

let chain: TestChain;
let db: TestDatabase;
let chains: Chain[];
let chainsFile: string;
const pools: Pool[] = [];
const relayerKey = generatePrivateKey();
const operator = privateKeyToAccount(relayerKey).address;
/** Every log line the relayers wrote. */
const logged: string[] = [];
const log = createLogger('trace', { write: (line: string) => void logged.push(line) });
const PERIOD = 60;
const AMOUNT = 10_000_000n; // 10 USDC
let nextPayer = 0;
const fundingOf = new Map<Address, Promise<unknown>>();

beforeAll(async () => {
  chain = await startTestChain();
  db = await createTestDatabase();
  chainsFile = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-')));
  chains = loadChains(chainsFile, {});
  await chain.testClient.setBalance({ address: operator, value: 10n ** 20n });
}, 120_000);

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db?.drop();
  await chain?.stop();
});

function relayer(overrides: Partial<RelayerOptions> = {}): Relayer {
  const pool = createPool(db.url, 4);
  pools.push(pool);
  return createRelayer({
    pool,
    chains,
    keys: [{ chainId: chain.chainId, key: new Secret<Hex>(relayerKey), source: 'test' }],
    stuckBlocks: 3,
    minBalance: '0.01',
    log,
    ...overrides,
  });
}

/** A payer of its own (a fresh address anvil lets the test send from, with gas and 100 USDC) subscribes; returns the subscription's id and payer. */
async function subscribe(opts: { endsAt?: number; allowance?: bigint; operator?: Address } = {}): Promise<{ id: bigint; payer: Address }> {
  const payer = privateKeyToAccount(generatePrivateKey()).address;
  await chain.testClient.impersonateAccount({ address: payer });
  await chain.testClient.setBalance({ address: payer, value: 10n ** 18n });
  // One transfer at a time from each funding payer: the tests subscribe more at once than there are
  // payers, and two sends from one account at once may be given one nonce by the node
  // ("replacement transaction underpriced").
  const from = chain.payers[nextPayer++ % chain.payers.length].address;
  const funded = (fundingOf.get(from) ?? Promise.resolve()).then(() => chain.transfer({ from, to: payer, amountAtomic: AMOUNT * 10n }));
  fundingOf.set(from, funded.catch(() => undefined));
  await funded;
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  const approve = await wallet.writeContract({
    account: payer, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, opts.allowance ?? AMOUNT * 100n],
  });
  await chain.publicClient.waitForTransactionReceipt({ hash: approve });
  const hash = await wallet.writeContract({
    account: payer,
    chain: null,
    address: chain.subscriptionManager,
    abi: SUBSCRIPTION_MANAGER_ABI,
    functionName: 'subscribe',
    args: [
      {
        payee: '0x00000000000000000000000000000000000000aa',
        token: chain.token,
        amount: AMOUNT,
        period: PERIOD,
        feeBps: 100,
        feeAddress: chain.feeAddress,
        operator: opts.operator ?? operator,
        endsAt: opts.endsAt ?? 0,
        checkoutReference: `0x${'11'.repeat(32)}`,
      },
    ],
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe('success');
  const [ev] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs });
  return { id: ev.args.id, payer };
}

async function nextPeriod(): Promise<void> {
  await chain.testClient.increaseTime({ seconds: PERIOD + 1 });
  await chain.mine(1);
}

const charge = (id: bigint, periodIndex = 1) => ({ contract: chain.subscriptionManager, onchainId: id, periodIndex, paymentReference: `0x${id.toString(16).padStart(14, '0')}${periodIndex.toString(16).padStart(2, '0')}` as Hex });

async function chargedLogs(id: bigint): Promise<number> {
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id }, fromBlock: 0n });
  return logs.length;
}

/** The records, less those a round closed without broadcasting them (test/helpers/relayer-rows.ts). */
async function rows() {
  const pool = pools[0] ?? createPool(db.url, 1);
  return withoutUnsent(await relayerTransactionsOf(pool, chain.chainId));
}

describe('sending', () => {
  it('simulates, records then broadcasts a charge that is mined; asked again for the same period, returns the same transaction', async () => {
    const r = relayer();
    expect(r.operatorAddress(chain.chainId)).toBe(operator);
    expect(r.operatorAddress(84532)).toBeNull();
    // No relayer on that chain: a rejection, as any other failed send (not a throw at the call).
    await expect(r.sendCharge(84532, { contract: chain.subscriptionManager, onchainId: 1n, periodIndex: 1, paymentReference: '0x0000000000000101' })).rejects.toThrow(RelayerNotConfigured);
    const { id } = await subscribe();
    expect(await r.simulateCharge(chain.chainId, charge(id))).toMatchObject({ ok: false, code: 'period_not_begun' });
    await nextPeriod();
    expect(await r.simulateCharge(chain.chainId, charge(id))).toMatchObject({ ok: true, gas: expect.any(BigInt) });
    const sent = await r.sendCharge(chain.chainId, charge(id));
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: sent.txHash });
    expect(receipt.status).toBe('success');
    expect(receipt.from.toLowerCase()).toBe(operator.toLowerCase());
    expect(await chargedLogs(id)).toBe(1);
    const [row] = (await rows()).filter((x) => x.tx_hash === sent.txHash);
    expect(row).toMatchObject({ purpose: 'charge', nonce: String(sent.nonce), status: 'pending', broadcasts: 1 });
    expect(BigInt(row.max_fee_per_gas)).toBeGreaterThan(0n);
    expect(row.raw_tx).toMatch(/^0x02/);

    // Again for the same period: the transaction of it, not a second one.
    expect(await r.sendCharge(chain.chainId, charge(id))).toEqual(sent);
    expect(await r.simulateCharge(chain.chainId, charge(id))).toMatchObject({ ok: false, code: 'period_already_charged' });
    await r.upkeep();
    expect((await rows()).find((x) => x.tx_hash === sent.txHash)).toMatchObject({ status: 'mined', mined_block: String(receipt.blockNumber) });
    expect((await rows()).filter((x) => x.subject === `charge:${chain.subscriptionManager.toLowerCase()}:${id}:1`)).toHaveLength(1);

    // A cancel through the relayer (the operator may cancel): no charge after it.
    const cancel = await r.sendCancel(chain.chainId, { contract: chain.subscriptionManager, onchainId: id });
    expect(cancel.nonce).toBe(sent.nonce + 1);
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: cancel.txHash })).status).toBe('success');
  });

  it('two relayers, each with its own pool, sending at once on one key: distinct consecutive nonces, every charge mined', async () => {
    const a = relayer();
    const b = relayer();
    const subs = await Promise.all([subscribe(), subscribe(), subscribe(), subscribe(), subscribe(), subscribe()]);
    await nextPeriod();
    const before = await chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' });
    const sent = await Promise.all(subs.map(({ id }, i) => (i % 2 === 0 ? a : b).sendCharge(chain.chainId, charge(id))));
    const nonces = sent.map((s) => s.nonce).sort((x, y) => x - y);
    expect(nonces).toEqual(Array.from({ length: subs.length }, (_, i) => before + i));
    for (const s of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: s.txHash })).status).toBe('success');
    for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
  });

  it('a relayer dying after recording and before broadcasting: the next one broadcasts that very transaction, one charge', async () => {
    const { id } = await subscribe();
    await nextPeriod();
    let recorded: { txHash: Hex; nonce: number } | null = null;
    const dying = relayer({
      afterRecord: (tx) => {
        recorded = tx;
        throw new Error('process killed');
      },
    });
    await expect(dying.sendCharge(chain.chainId, charge(id))).rejects.toThrow('process killed');
    expect(recorded).not.toBeNull();
    const { txHash, nonce } = recorded!;
    await expect(chain.publicClient.getTransaction({ hash: txHash })).rejects.toThrow();
    expect((await rows()).find((x) => x.tx_hash === txHash)).toMatchObject({ status: 'pending', broadcasts: 0 });

    // A new process: the recorded transaction is broadcast, not a new one with a new nonce.
    const next = relayer();
    expect(await next.sendCharge(chain.chainId, charge(id))).toEqual({ txHash, nonce });
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: txHash })).status).toBe('success');
    expect(await chargedLogs(id)).toBe(1);
    // The same through upkeep alone (a worker with nothing to send).
    const other = await subscribe();
    await nextPeriod();
    let second: Hex | null = null;
    await expect(relayer({ afterRecord: (tx) => { second = tx.txHash; throw new Error('killed again'); } }).sendCharge(chain.chainId, charge(other.id))).rejects.toThrow('killed again');
    await relayer().upkeep();
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: second! })).status).toBe('success');
    expect(await chargedLogs(other.id)).toBe(1);
    const fresh = await subscribe();
    await nextPeriod();
    const after = await next.sendCharge(chain.chainId, charge(fresh.id));
    expect(after.nonce).toBe(nonce + 2);
  });

  // A settle does not ask the node about a transaction it took within the last two blocks (a hold
  // after a burst of sends would ask about hundreds it just broadcast); one the node lost after
  // that is found by a later settle and broadcast again.
  it('a transaction the node took and then lost from its pool: a settle blocks later broadcasts that very transaction again; one charge', async () => {
    const r = relayer();
    const { id } = await subscribe();
    await nextPeriod();
    await chain.testClient.setAutomine(false);
    try {
      const sent = await r.sendCharge(chain.chainId, charge(id));
      await chain.testClient.dropTransaction({ hash: sent.txHash });
      await expect(chain.publicClient.getTransaction({ hash: sent.txHash })).rejects.toThrow();
      // Empty blocks: the transaction is no longer one the node just took.
      await chain.mine(2);
      await r.upkeep();
      expect(await chain.publicClient.getTransaction({ hash: sent.txHash })).toMatchObject({ hash: sent.txHash });
      // Its one record, counted broadcast twice: the same transaction, not a new one.
      expect((await rows()).filter((x) => x.subject === `charge:${chain.subscriptionManager.toLowerCase()}:${id}:1`)).toMatchObject([{ tx_hash: sent.txHash, status: 'pending', broadcasts: 2 }]);
      await chain.mine(1);
      expect((await chain.publicClient.getTransactionReceipt({ hash: sent.txHash })).status).toBe('success');
      expect(await chargedLogs(id)).toBe(1);
    } finally {
      await chain.testClient.setAutomine(true);
    }
  });

  it('a transaction stuck for RELAYER_STUCK_BLOCKS under a rising base fee is replaced with higher fees, same nonce; one charge', async () => {
    const r = relayer();
    const { id } = await subscribe();
    await nextPeriod();
    await chain.testClient.setAutomine(false);
    try {
      const sent = await r.sendCharge(chain.chainId, charge(id));
      const [first] = (await rows()).filter((x) => x.tx_hash === sent.txHash);
      // The base fee jumps above what the transaction offers: it stays in the pool, unmined.
      await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: BigInt(first.max_fee_per_gas) * 50n + parseGwei('10') });
      await chain.mine(3);
      await expect(chain.publicClient.getTransactionReceipt({ hash: sent.txHash })).rejects.toThrow();
      await r.upkeep();
      const replacement = (await rows()).find((x) => x.replaces_id === first.id);
      expect(replacement).toMatchObject({ nonce: first.nonce, status: 'pending', broadcasts: 1 });
      expect(BigInt(replacement!.max_fee_per_gas)).toBeGreaterThanOrEqual((BigInt(first.max_fee_per_gas) * 125n) / 100n);
      expect(BigInt(replacement!.max_priority_fee_per_gas)).toBeGreaterThan(BigInt(first.max_priority_fee_per_gas));
      await chain.mine(1);
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: replacement!.tx_hash as Hex });
      expect(receipt.status).toBe('success');
      await r.upkeep();
      const settled = (await rows()).filter((x) => x.nonce === first.nonce);
      expect(settled.map((x) => [x.tx_hash, x.status])).toEqual([
        [first.tx_hash, 'dropped'],
        [replacement!.tx_hash, 'mined'],
      ]);
      expect(await chargedLogs(id)).toBe(1);
    } finally {
      await chain.testClient.setAutomine(true);
    }
  });
});

describe('sending in batches (one hold of the sequence lock)', () => {
  it('twelve charges asked at once (the job\'s parallel lanes): one settle and one read of the node for all, distinct consecutive nonces, each recorded before the node had it, every charge mined once', async () => {
    const proxy = await startRpcProxy(chain.rpcUrl);
    try {
      const viaProxy = loadChains(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-batch-')), { rpc_urls: [proxy.url] }), {});
      const checkPool = createPool(db.url, 1);
      pools.push(checkPool);
      const atRecord: { txHash: Hex; rowBroadcasts: number | null; nodeKnew: boolean }[] = [];
      const r = relayer({
        chains: viaProxy,
        afterRecord: async (tx) => {
          const row = (await relayerTransactionsOf(checkPool, chain.chainId)).find((x) => x.tx_hash === tx.txHash);
          const nodeKnew = await chain.publicClient.getTransaction({ hash: tx.txHash }).then(() => true, () => false);
          atRecord.push({ txHash: tx.txHash, rowBroadcasts: row ? row.broadcasts : null, nodeKnew });
        },
      });
      const subs = await Promise.all(Array.from({ length: 12 }, () => subscribe()));
      await nextPeriod();
      const before = await chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' });
      proxy.resetCalls();
      const sent = await Promise.all(subs.map(({ id }) => r.sendCharge(chain.chainId, charge(id))));
      expect(sent.map((x) => x.nonce).sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => before + i));
      // Each one recorded (committed, seen from another connection) and unknown to the node when its record was done.
      expect(atRecord).toHaveLength(12);
      for (const seen of atRecord) expect(seen).toMatchObject({ rowBroadcasts: 0, nodeKnew: false });
      expect(new Set(atRecord.map((x) => x.txHash))).toEqual(new Set(sent.map((x) => x.txHash)));
      // One send at a time would have read the head 12 times and the nonce counts 24-36 times.
      expect(proxy.calls('eth_blockNumber')).toBeLessThanOrEqual(3);
      expect(proxy.calls('eth_getTransactionCount')).toBeLessThanOrEqual(4);
      expect(proxy.calls('eth_sendRawTransaction')).toBe(12);
      for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
      for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it('two relayers sending batches of eight at once on one key: sixteen distinct consecutive nonces, every charge mined once', async () => {
    const a = relayer();
    const b = relayer();
    const subs = await Promise.all(Array.from({ length: 16 }, () => subscribe()));
    await nextPeriod();
    const before = await chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' });
    const sent = await Promise.all([
      ...subs.slice(0, 8).map(({ id }) => a.sendCharge(chain.chainId, charge(id))),
      ...subs.slice(8).map(({ id }) => b.sendCharge(chain.chainId, charge(id))),
    ]);
    expect(sent.map((x) => x.nonce).sort((x, y) => x - y)).toEqual(Array.from({ length: 16 }, (_, i) => before + i));
    for (const x of sent) expect((await chain.publicClient.waitForTransactionReceipt({ hash: x.txHash })).status).toBe('success');
    for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
  });

  it('in one batch, a charge that would revert is refused alone and a crash after a record stops the hold: the recorded one is broadcast by the next hold, the rest follow it, no nonce hole, one charge each', async () => {
    const subs = await Promise.all(Array.from({ length: 5 }, () => subscribe()));
    await nextPeriod();
    let records = 0;
    let crashed: Hex | null = null;
    const r = relayer({
      afterRecord: (tx) => {
        records += 1;
        if (records === 2) {
          crashed = tx.txHash;
          throw new Error('process killed');
        }
      },
    });
    const before = await chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' });
    const unknown = charge(999_999n);
    const asked = [r.sendCharge(chain.chainId, charge(subs[0].id)), r.sendCharge(chain.chainId, unknown), ...subs.slice(1).map(({ id }) => r.sendCharge(chain.chainId, charge(id)))];
    const answers = await Promise.allSettled(asked);
    expect(answers[1]).toMatchObject({ status: 'rejected', reason: expect.any(RelayerCallRefused) });
    expect(answers.filter((x) => x.status === 'rejected' && String(x.reason).includes('process killed'))).toHaveLength(1);
    expect(answers.filter((x) => x.status === 'fulfilled')).toHaveLength(4);
    expect(crashed).not.toBeNull();
    // Nothing recorded for the refused one; the crashed one's transaction is on its way (broadcast by the next hold's settle).
    const mine = (await rows()).filter((x) => Number(x.nonce) >= before);
    expect(mine.some((x) => x.subject.endsWith(':999999:1'))).toBe(false);
    expect(mine.map((x) => Number(x.nonce)).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4].map((i) => before + i));
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: crashed! })).status).toBe('success');
    for (const answer of answers) if (answer.status === 'fulfilled') expect((await chain.publicClient.waitForTransactionReceipt({ hash: answer.value.txHash })).status).toBe('success');
    for (const { id } of subs) expect(await chargedLogs(id)).toBe(1);
    expect(await chain.publicClient.getTransactionCount({ address: operator, blockTag: 'latest' })).toBe(before + 5);
  });
});

describe('settling', () => {
  // Found by bench:subscriptions (1,000 charges, a block a second): one charge mined on-chain was
  // recorded `dropped`. The nonce count at latest can include a block whose receipt the node (or
  // another node behind a load-balanced URL) does not return yet.
  it('a used nonce whose receipt the node does not return yet stays pending (not dropped), is mined once the receipt comes, and is dropped only after RELAYER_STUCK_BLOCKS', async () => {
    const proxy = await startRpcProxy(chain.rpcUrl);
    try {
      const viaProxy = loadChains(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-lag-')), { rpc_urls: [proxy.url] }), {});
      const r = relayer({ chains: viaProxy });
      const hidden = new Set<string>();
      proxy.rewrite((req) => {
        const hash = String((req.params ?? [])[0] ?? '').toLowerCase();
        return req.method === 'eth_getTransactionReceipt' && hidden.has(hash) ? { jsonrpc: '2.0', id: req.id ?? null, result: null } : undefined;
      });
      const { id } = await subscribe();
      await nextPeriod();
      const sent = await r.sendCharge(chain.chainId, charge(id));
      expect((await chain.publicClient.waitForTransactionReceipt({ hash: sent.txHash })).status).toBe('success');
      hidden.add(sent.txHash.toLowerCase());
      await r.upkeep();
      expect((await rows()).find((x) => x.tx_hash === sent.txHash)).toMatchObject({ status: 'pending' });
      hidden.clear();
      await r.upkeep();
      expect((await rows()).find((x) => x.tx_hash === sent.txHash)).toMatchObject({ status: 'mined' });

      // A nonce used by a transaction the records do not hold (the key used elsewhere): no receipt
      // of ours ever comes; after RELAYER_STUCK_BLOCKS (3 here) the row is dropped.
      const other = await subscribe();
      await nextPeriod();
      const lost = await r.sendCharge(chain.chainId, charge(other.id));
      await chain.publicClient.waitForTransactionReceipt({ hash: lost.txHash });
      hidden.add(lost.txHash.toLowerCase());
      await r.upkeep();
      expect((await rows()).find((x) => x.tx_hash === lost.txHash)).toMatchObject({ status: 'pending' });
      await chain.mine(3);
      await r.upkeep();
      expect((await rows()).find((x) => x.tx_hash === lost.txHash)).toMatchObject({ status: 'dropped' });
    } finally {
      proxy.rewrite(null);
      await proxy.close();
    }
  });
});

describe('reorgs', () => {
  it('a mined charge whose block a reorg takes (the node not pooling it again) is broadcast again as it was: no nonce hole, one charge', async () => {
    const r = relayer();
    const { id } = await subscribe();
    await nextPeriod();
    const sent = await r.sendCharge(chain.chainId, charge(id));
    await chain.publicClient.waitForTransactionReceipt({ hash: sent.txHash });
    await r.upkeep();
    expect((await rows()).find((x) => x.tx_hash === sent.txHash)).toMatchObject({ status: 'mined' });
    await chain.reorg(1);
    await expect(chain.publicClient.getTransactionReceipt({ hash: sent.txHash })).rejects.toThrow();
    expect(await chargedLogs(id)).toBe(0);
    // The next send settles first: the lost nonce is filled by the recorded transaction, the new one follows it.
    const other = await subscribe();
    await nextPeriod();
    const next = await r.sendCharge(chain.chainId, charge(other.id));
    expect(next.nonce).toBe(sent.nonce + 1);
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: sent.txHash })).status).toBe('success');
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: next.txHash })).status).toBe('success');
    expect(await chargedLogs(id)).toBe(1);
    await r.upkeep();
    expect((await rows()).find((x) => x.tx_hash === sent.txHash)).toMatchObject({ status: 'mined', broadcasts: 2 });
  });
});

describe('simulateCharge', () => {
  it('says what is short: the balance or the allowance, in token units; canceled; ended', async () => {
    const r = relayer();
    const poor = await subscribe();
    const stingy = await subscribe({ allowance: AMOUNT + 4_000_000n });
    const canceled = await subscribe();
    const ending = await subscribe({ endsAt: Number((await chain.publicClient.getBlock()).timestamp) + PERIOD + 30 });
    await nextPeriod();
    await nextPeriod();
    // The poor one keeps 3.5 USDC.
    const balance = await chain.balanceOf(poor.payer);
    await chain.transfer({ from: poor.payer, to: chain.feeAddress, amountAtomic: balance - 3_500_000n });
    const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
    await chain.publicClient.waitForTransactionReceipt({
      hash: await wallet.writeContract({ account: canceled.payer, chain: null, address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [canceled.id] }),
    });

    expect(await r.simulateCharge(chain.chainId, charge(poor.id))).toEqual({
      ok: false,
      code: 'insufficient_balance',
      shortAtomic: 6_500_000n,
      message: 'Your wallet holds 3.5 USDC but this period costs 10 USDC: 6.5 USDC short. Add at least 6.5 USDC to the wallet you subscribed with.',
    });
    // The first period took 10 of the 14 approved: 4 left.
    expect(await r.simulateCharge(chain.chainId, charge(stingy.id))).toEqual({
      ok: false,
      code: 'insufficient_allowance',
      shortAtomic: 6_000_000n,
      message: 'Your wallet allows the subscription to take 4 USDC but this period costs 10 USDC: the allowance is 6 USDC short. Approve at least 10 USDC for the subscription again.',
    });
    expect(await r.simulateCharge(chain.chainId, charge(canceled.id))).toMatchObject({ ok: false, code: 'subscription_canceled' });
    expect(await r.simulateCharge(chain.chainId, charge(ending.id))).toMatchObject({ ok: false, code: 'subscription_ended', message: expect.stringMatching(/^The subscription ended on \d{4}-\d\d-\d\d/) });
  });

  it('RPC down: RelayerUnavailable, not a customer failure; the upkeep warns once for the outage, not at every pass', async () => {
    const proxy = await startRpcProxy(chain.rpcUrl);
    try {
      const viaProxy = loadChains(chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'relayer-proxy-')), { rpc_urls: [proxy.url] }), {});
      const r = relayer({ chains: viaProxy });
      const { id } = await subscribe();
      await proxy.down();
      await expect(r.simulateCharge(chain.chainId, charge(id))).rejects.toBeInstanceOf(RelayerUnavailable);
      await expect(r.sendCharge(chain.chainId, charge(id))).rejects.toBeInstanceOf(RelayerUnavailable);
      const mark = logged.length;
      for (let i = 0; i < 3; i++) await r.upkeep();
      await proxy.up();
      await r.upkeep();
      const lines = logged.slice(mark).map((l) => JSON.parse(l) as { msg: string; level: number });
      expect(lines.filter((l) => l.msg.startsWith('relayer upkeep failed')).map((l) => l.level)).toEqual([40]);
      expect(lines.filter((l) => l.msg === 'relayer upkeep works again')).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });
});

describe('gas and keys', () => {
  it("a relayer without gas: RelayerOutOfGas (the operator's problem), nothing recorded; its balance is a metric and a warning", async () => {
    const emptyKey = generatePrivateKey();
    const empty = privateKeyToAccount(emptyKey).address;
    const metricsPool = createPool(db.url, 1);
    pools.push(metricsPool);
    const metrics = createMetrics({ queues: [], db: metricsPool, defaultMetrics: false });
    const r = relayer({ keys: [{ chainId: chain.chainId, key: new Secret<Hex>(emptyKey), source: 'test' }], metrics: metrics.relayer });
    // A subscription operated by the empty relayer.
    const { id } = await subscribe({ operator: empty });
    await nextPeriod();
    expect(await r.simulateCharge(chain.chainId, charge(id))).toMatchObject({ ok: true, gas: expect.any(BigInt) });
    const failed = await r.sendCharge(chain.chainId, charge(id)).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(RelayerOutOfGas);
    expect((failed as RelayerOutOfGas).address).toBe(empty);
    expect((await rows()).filter((x) => x.from_address === empty.toLowerCase())).toEqual([]);

    const since = logged.length;
    await r.upkeep();
    const text = await metrics.registry.metrics();
    expect(text).toContain(`relayer_native_balance{chain_id="${chain.chainId}",address="${empty}"} 0`);
    expect(text).toContain(`relayer_balance_low{chain_id="${chain.chainId}",address="${empty}"} 1`);
    expect(text).toMatch(/relayer_transactions_total\{chain_id="31337",purpose="charge",outcome="out_of_gas"\} 1/);
    expect(logged.slice(since).filter((l) => l.includes('relayer balance is low'))).toHaveLength(1);
    await r.upkeep();
    expect(logged.slice(since).filter((l) => l.includes('relayer balance is low'))).toHaveLength(1);
  });

  it('a key file its group or others may read is refused in one line; RELAYER_PRIVATE_KEY_<chainId> wins; the local chain finds relayer.key beside CHAINS_FILE', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'relayer-keys-'));
    const file = path.join(dir, 'key');
    writeFileSync(file, `${relayerKey}\n`);
    chmodSync(file, 0o644);
    const config = (env: Record<string, string>) => loadConfig({ DATABASE_URL: db.url, CHAINS_FILE: chainsFile, ...env });
    let err: unknown;
    try {
      loadRelayerKeys(config({ RELAYER_PRIVATE_KEY_FILE: file }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RelayerKeyError);
    expect((err as Error).message).toBe(`${file} is readable by others (mode 644): chmod 600 it`);
    expect((err as Error).message).not.toContain(relayerKey.slice(2));
    chmodSync(file, 0o600);
    const [fromFile] = loadRelayerKeys(config({ RELAYER_PRIVATE_KEY_FILE: file })).filter((k) => k.chainId === chain.chainId);
    expect(fromFile.key.reveal()).toBe(relayerKey);
    expect(fromFile.source).toBe('RELAYER_PRIVATE_KEY_FILE');

    const other = generatePrivateKey();
    const both = loadRelayerKeys(config({ RELAYER_PRIVATE_KEY_FILE: file, [`RELAYER_PRIVATE_KEY_${chain.chainId}`]: other }));
    expect(both.find((k) => k.chainId === chain.chainId)).toMatchObject({ source: `RELAYER_PRIVATE_KEY_${chain.chainId}` });
    expect(both.find((k) => k.chainId === chain.chainId)!.key.reveal()).toBe(other);
    expect(both.find((k) => k.chainId === 84532)!.key.reveal()).toBe(relayerKey);

    // Nothing configured: only the local chain, and only with relayer.key beside its chains file.
    expect(loadRelayerKeys(config({}))).toEqual([]);
    writeFileSync(path.join(path.dirname(chainsFile), LOCAL_RELAYER_KEY_FILE), relayerKey, { mode: 0o600 });
    const local = loadRelayerKeys(config({}));
    expect(local.map((k) => k.chainId)).toEqual([chain.chainId]);
    expect(local[0].key.reveal()).toBe(relayerKey);
  });

  it('the key is in no log line, no error and no printed configuration', async () => {
    const secretHex = relayerKey.slice(2);
    const c = loadConfig({ DATABASE_URL: db.url, CHAINS_FILE: chainsFile, [`RELAYER_PRIVATE_KEY_${chain.chainId}`]: relayerKey });
    expect(JSON.stringify(c)).not.toContain(secretHex);
    expect(inspect(c, { depth: 10 })).not.toContain(secretHex);
    log.info({ config: c }, 'configuration');
    let bad: unknown;
    try {
      loadConfig({ DATABASE_URL: db.url, CHAINS_FILE: chainsFile, [`RELAYER_PRIVATE_KEY_${chain.chainId}`]: `${relayerKey}ff` });
    } catch (e) {
      bad = e;
    }
    expect(bad).toBeInstanceOf(ConfigError);
    expect((bad as Error).message).not.toContain(secretHex);
    // Everything every relayer of this file logged (sends, replacements, refusals, warnings) and this run's.
    const r = relayer();
    const { id } = await subscribe();
    await nextPeriod();
    await r.sendCharge(chain.chainId, charge(id));
    // A charge the contract would refuse (a period not begun): refused before anything is signed, with the contract's error.
    const refused = await r.sendCharge(chain.chainId, charge(id, 5)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RelayerCallRefused);
    expect((refused as RelayerCallRefused).errorName).toBe('PeriodNotBegun');
    log.error({ err: refused }, 'refused');
    await r.upkeep();
    expect(logged.length).toBeGreaterThan(10);
    expect(logged.some((l) => l.includes('relayer transaction stuck: replaced with higher fees'))).toBe(true);
    const all = logged.join('\n').toLowerCase();
    expect(all).not.toContain(secretHex.toLowerCase());
  });

  it('a worker process: refuses a key file others may read in one line; with a mode-600 one, names the operator and never the key', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'relayer-worker-'));
    const file = path.join(dir, 'relayer.key');
    writeFileSync(file, relayerKey, { mode: 0o644 });
    chmodSync(file, 0o644);
    const env = { DATABASE_URL: db.url, QUEUE_BACKEND: 'postgres', CHAINS_FILE: chainsFile, WORKER_PORT: '0', RELAYER_PRIVATE_KEY_FILE: file, MAIL_OUTBOX_DIR: dir };
    const refused = spawnWorker(env);
    expect(await refused.exited).toBe(1);
    const stderr = refused.lines.filter((l) => l.startsWith('stderr: ')).join('').slice('stderr: '.length);
    expect(stderr.trim().split('\n')).toEqual([`cannot start: RELAYER_PRIVATE_KEY_FILE: ${file} is readable by others (mode 644): chmod 600 it`]);

    chmodSync(file, 0o600);
    const worker = spawnWorker({ ...env, LOG_LEVEL: 'debug' });
    try {
      const started = await worker.waitForLine((l) => l.msg === 'worker started', 60_000);
      expect(started.relayer).toEqual(expect.arrayContaining([{ chain_id: chain.chainId, operator, key: 'RELAYER_PRIVATE_KEY_FILE' }]));
    } finally {
      await worker.stop();
    }
    expect(worker.lines.join('\n').toLowerCase()).not.toContain(relayerKey.slice(2).toLowerCase());
  }, 120_000);
});
