// Paid means paid, against a node whose eth_getLogs answers are broken at the encoding level, on
// anvil through the watcher's own RPC path (a rewriting proxy, one watcher run at a time). Each
// attack starts from a real transaction that moves less than the invoice asks (or moves it to
// another address) and has the node rewrite that transaction's logs so that a lenient decoder
// would read a full payment to the merchant: an amount of odd hex, with a word appended, or cut
// short; a recipient topic with dirty high bytes, or of 31 or 33 bytes; the log's contract in other
// letter case, or another contract; a log without its place; the reference in upper case; a
// genuine log answered again. The decoder (event-logs.ts) is where these stop: a log of the event
// that is not its exact encoding fails the run with nothing recorded (dropping it would move the
// cursor past a payment for good), and each test checks, once the node tells the truth, that the
// invoice shows exactly what moved and that a later honest payment is still found; with a second,
// honest URL the next run leads with it. What a node can still do with well-formed lies
// (docs/payments.md, "What a node can still do") is not tested here.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWalletClient, http, maxUint256, toEventSelector, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ERC20_TRANSFER, FEE_PROXY_ABI, TRANSFER_WITH_REFERENCE_AND_FEE } from '../../src/chain/abi.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { loadChains } from '../../src/chains-config.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { startRpcProxy, startTestChain, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

/** A log as eth_getLogs answers it (raw JSON): any field may be what the liar made of it. */
type WireLog = { address: string; topics: string[]; data: string } & Record<string, unknown>;
interface LogFilter {
  address?: string | string[];
  topics?: (string | string[] | null)[];
  fromBlock?: string;
  toBlock?: string;
}

const TRANSFER_TOPIC = toEventSelector(ERC20_TRANSFER);
const PROXY_TOPIC = toEventSelector(TRANSFER_WITH_REFERENCE_AND_FEE);
const USDC = 1_000_000n;

let chain: TestChain;
let fx: ApiFixture;
let metrics: ReturnType<typeof createMetrics>;
let proxy: RpcProxy;
let run: () => Promise<string>;
let wallet: ReturnType<typeof createWalletClient>;
const api = apiClient(() => fx.api.app);
const keyA = () => fx.merchant.keys.sandbox;
const merchantA = privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  chain = await startTestChain();
  proxy = await startRpcProxy(chain.rpcUrl);
  const dir = mkdtempSync(path.join(tmpdir(), 'zz-broken-logs-'));
  fx = await startApiFixture({ CHAINS_FILE: chain.writeChainsFile(dir), RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', keyA(), { settlement_address: merchantA })).status).toBe(200);
  const ep = await api.post('/v1/webhook_endpoints', keyA(), { url: 'https://93.184.215.14/hooks', enabled_events: ['*'] });
  expect(ep.status, ep.raw).toBe(200);
  const file = chain.writeChainsFile(dir, { rpc_urls: [proxy.url] });
  const log = createLogger('info', { write: () => undefined });
  metrics = createMetrics({ queues: [], db: fx.api.pool, defaultMetrics: false });
  const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log, metrics: metrics.chain });
  run = () => watcher.run(chain.chainId);
  wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  for (const p of chain.payers.slice(0, 3)) {
    await wallet.writeContract({ account: p.address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.feeProxy, maxUint256] });
  }
  await chain.mine(5);
  await catchUp();
}, 180_000);
afterEach(() => proxy.rewrite(null));
afterAll(async () => {
  await fx?.close();
  await proxy?.close();
  await chain?.stop();
});

async function cursor(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ b: string }>('select block_number::text as b from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].b) : -1n;
}
/**
 * Watcher runs until the cursor reaches the safe head, through the back-off a refused answer left
 * (a run that throws rejects it).
 */
async function catchUp(by: () => Promise<string> = run): Promise<void> {
  await chain.mine(3);
  const safe = (await chain.publicClient.getBlockNumber()) - 2n;
  await waitUntil(async () => {
    if ((await cursor()) >= safe) return true;
    await by();
    return (await cursor()) >= safe;
  }, 30_000, 20);
}
async function sent(amount: string): Promise<JsonBody> {
  const c = await api.post('/v1/invoices', keyA(), { customer_email: `p-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(c.status, c.raw).toBe(200);
  const s = await api.post(`/v1/invoices/${c.body.data.id}/send`, keyA());
  expect(s.status, s.raw).toBe(200);
  return s.body.data;
}
const inv = async (id: string) => (await api.get(`/v1/invoices/${id}`, keyA())).body.data;
const refOf = (i: JsonBody) => i.payment_instructions.payment_reference as Hex;

/** The transaction's logs as the node itself has them (its receipt, raw): what the liar starts from. */
async function logsOf(hash: Hex): Promise<WireLog[]> {
  await chain.publicClient.waitForTransactionReceipt({ hash });
  const receipt = await chain.publicClient.request({ method: 'eth_getTransactionReceipt', params: [hash] });
  if (!receipt) throw new Error(`no receipt for ${hash}`);
  return receipt.logs.map((l) => ({ ...l, topics: [...l.topics] }));
}
/** A real proxy payment to the merchant (mined at once): its logs, the merchant's Transfer leg then the proxy's event. */
async function pay(reference: Hex, amount: bigint, payer = 0): Promise<WireLog[]> {
  const hash = await wallet.writeContract({
    account: chain.payers[payer].address, chain: null, address: chain.feeProxy, abi: FEE_PROXY_ABI,
    functionName: 'transferFromWithReferenceAndFee', args: [chain.token, merchantA, amount, reference, 0n, chain.feeAddress], gas: 200_000n,
  });
  return logsOf(hash);
}
/** A real plain transfer (mined at once): its one Transfer log. */
async function transfer(to: Address, amount: bigint, payer = 1): Promise<WireLog[]> {
  const hash = await wallet.writeContract({ account: chain.payers[payer].address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'transfer', args: [to, amount], gas: 100_000n });
  return logsOf(hash);
}

/**
 * From now on the node answers, in place of the transaction's real logs, what `edit` makes of each
 * (in every eth_getLogs whose contract, event and blocks the real log fits, whatever recipient the
 * filter names). Returns how many answers carried the lie.
 */
function lie(logs: readonly WireLog[], edit: (log: WireLog) => WireLog[]): () => number {
  const tx = String(logs[0].transactionHash).toLowerCase();
  const forged = logs.map((origin) => ({ origin, answer: edit(origin) }));
  let served = 0;
  proxy.rewrite(async (req, real) => {
    if (req.method !== 'eth_getLogs') return undefined;
    const ans = await real();
    if (!Array.isArray(ans.result)) return ans;
    const f = (req.params?.[0] ?? {}) as LogFilter;
    const own = (ans.result as WireLog[]).filter((l) => String(l.transactionHash).toLowerCase() !== tx);
    const mine = forged.filter(({ origin }) => asks(f, origin)).flatMap((x) => x.answer);
    if (mine.length > 0) served++;
    return { ...ans, result: [...own, ...mine] };
  });
  return () => served;
}
function asks(f: LogFilter, log: WireLog): boolean {
  const addresses = [f.address ?? []].flat().map((a) => a.toLowerCase());
  const topic0 = [f.topics?.[0] ?? []].flat();
  const n = BigInt(String(log.blockNumber));
  return addresses.includes(log.address.toLowerCase()) && topic0.includes(log.topics[0]) && BigInt(f.fromBlock ?? '0x0') <= n && n <= BigInt(f.toBlock ?? '0x0');
}

const word = (n: bigint) => n.toString(16).padStart(64, '0');
const words = (data: string) => data.slice(2).match(/.{64}/g) ?? [];
const isLeg = (l: WireLog) => l.topics[0] === TRANSFER_TOPIC;
const isEvent = (l: WireLog) => l.topics[0] === PROXY_TOPIC;
/** The log claiming `amount`, well-formed: the Transfer's value, or the proxy event's amount (its third word). */
function claiming(l: WireLog, amount: bigint): WireLog {
  if (isLeg(l)) return { ...l, data: `0x${word(amount)}` };
  const w = words(l.data);
  w[2] = word(amount);
  return { ...l, data: `0x${w.join('')}` };
}
const movedBy = (l: WireLog, k: number): WireLog => ({ ...l, logIndex: `0x${(BigInt(String(l.logIndex)) + BigInt(k)).toString(16)}` });
const upper = (hex: string) => `0x${hex.slice(2).toUpperCase()}`;
const randomAddress = () => privateKeyToAccount(generatePrivateKey()).address;

async function counts(invoiceId: string) {
  const q = async (sql: string) => (await fx.api.pool.query<{ n: number; a: string | null }>(sql, [invoiceId])).rows;
  const ev = await q(`select type as a, count(*)::int as n from events where object_id = $1 group by type`);
  const whd = await q(`select count(*)::int as n, null as a from webhook_deliveries d join events e on e.id = d.event_id where e.object_id = $1 and e.type = 'invoice.paid'`);
  const pr = await q(`select count(*)::int as n, null as a from payments where invoice_id = $1 and status = 'confirmed'`);
  return { invoicePaid: ev.find((r) => r.a === 'invoice.paid')?.n ?? 0, paidWebhooks: whd[0].n, confirmedPayments: pr[0].n };
}
async function rowsOf(logs: readonly WireLog[]) {
  const { rows } = await fx.api.pool.query<{ tx_hash: string; tx_position: string; invoice_id: string | null; counted_atomic: string | null }>(
    'select tx_hash, tx_position, invoice_id, counted_atomic::text from payments where lower(tx_hash) = lower($1) order by tx_hash, tx_position', [String(logs[0].transactionHash)]);
  return rows;
}

/** While the node lies: nothing made the invoice paid, and it shows `paid` (atomic) of what it asks. */
async function notPaid(i: JsonBody, paid: bigint): Promise<void> {
  expect(await inv(i.id), 'while the node lies, the invoice shows what moved').toMatchObject({ status: 'open', amount_paid_atomic: paid.toString() });
  expect(await counts(i.id), 'while the node lies').toMatchObject({ invoicePaid: 0, paidWebhooks: 0 });
}
/**
 * The node tells the truth again: the invoice shows exactly `moved` (what really reached the
 * merchant for it), and a later honest payment of the rest is found and pays it, once.
 */
async function honestThenPaidOnce(i: JsonBody, total: bigint, moved: bigint, payments: number): Promise<void> {
  proxy.rewrite(null);
  await catchUp();
  expect(await inv(i.id), 'once the node tells the truth, the invoice shows what moved').toMatchObject({ status: 'open', amount_paid_atomic: moved.toString() });
  await pay(refOf(i), total - moved, 2);
  await catchUp();
  expect(await inv(i.id)).toMatchObject({ status: 'paid', amount_paid_atomic: total.toString() });
  expect(await counts(i.id)).toMatchObject({ invoicePaid: 1, paidWebhooks: 1, confirmedPayments: payments + 1 });
}

/**
 * The node answers `edit` of the transaction's real logs: the run fails with `error` and nothing of
 * the transaction is recorded; once the node tells the truth, `moved` (what really reached the
 * merchant for the invoice) counts, and an honest payment of the rest pays it, once.
 */
async function refusedThenCounted(i: JsonBody, total: bigint, logs: WireLog[], edit: (l: WireLog) => WireLog[], error: RegExp, moved: bigint): Promise<void> {
  const served = lie(logs, edit);
  await expect(catchUp()).rejects.toThrow(error);
  expect(served()).toBeGreaterThan(0);
  await notPaid(i, 0n);
  expect(await rowsOf(logs)).toEqual([]);
  await honestThenPaidOnce(i, total, moved, moved > 0n ? 1 : 0);
}

/**
 * The node answers `edit` of the transaction's real logs: the run goes on, and `moved` counts once,
 * on the transaction's one row; once the node tells the truth, an honest payment of the rest pays
 * the invoice, once.
 */
async function countedOnce(i: JsonBody, total: bigint, logs: WireLog[], edit: (l: WireLog) => WireLog[], moved: bigint): Promise<void> {
  const served = lie(logs, edit);
  await catchUp();
  expect(served()).toBeGreaterThan(0);
  await notPaid(i, moved);
  expect(await rowsOf(logs)).toEqual([expect.objectContaining({ invoice_id: i.id, counted_atomic: moved.toString() })]);
  await honestThenPaidOnce(i, total, moved, 1);
}

describe('the amount of a real 1 USDC payment, rewritten to claim the whole invoice', () => {
  it('in an odd number of hex digits: the run fails with nothing recorded; the real 1 USDC counts once the node stops', async () => {
    const total = 100_010_000n;
    const i = await sent('100.01');
    const logs = await pay(refOf(i), USDC);
    await refusedThenCounted(i, total, logs, (l) => [isLeg(l) ? { ...l, data: `0x${total.toString(16).padStart(63, '0')}` } : claiming(l, total)], /not the event's encoding: data that is not whole bytes/, USDC);
  }, 120_000);

  it('as its own word followed by a word claiming the whole invoice: the run fails with nothing recorded; the real 1 USDC counts once the node stops', async () => {
    const total = 100_020_000n;
    const i = await sent('100.02');
    const logs = await pay(refOf(i), USDC);
    await refusedThenCounted(i, total, logs, (l) => [{ ...l, data: `${l.data}${word(total)}` }], /not the event's encoding: data of \d+ bytes/, USDC);
  }, 120_000);

  it('cut to fewer than 32 bytes: the run fails with nothing recorded; the real 1 USDC counts once the node stops', async () => {
    const total = 100_030_000n;
    const i = await sent('100.03');
    const logs = await pay(refOf(i), USDC);
    await refusedThenCounted(i, total, logs, (l) => [isLeg(l) ? { ...l, data: `0x0${total.toString(16)}` } : claiming(l, total)], /not the event's encoding: data of \d+ bytes/, USDC);
  }, 120_000);
});

describe("a real transfer of the whole amount to another address, its recipient topic rewritten to carry the merchant's address", () => {
  it('as a 32-byte word whose top 12 bytes are not zero: the run fails with nothing recorded, never paid', async () => {
    const total = 100_040_000n;
    const i = await sent('100.04');
    const logs = await transfer(randomAddress(), total);
    await refusedThenCounted(i, total, logs, (l) => [{ ...l, topics: [l.topics[0], l.topics[1], `0x${'ff'.repeat(12)}${merchantA.slice(2).toLowerCase()}`] }], /not the event's encoding: an address word with its high bytes set/, 0n);
  }, 120_000);

  it('as a topic of 31 bytes, or of 33 with a byte before the word: the run fails with nothing recorded, never paid', async () => {
    const total = 100_050_000n;
    const i = await sent('100.05');
    const logs = await transfer(randomAddress(), total);
    const to = merchantA.slice(2).toLowerCase();
    await refusedThenCounted(i, total, logs, (l) => [
      { ...l, topics: [l.topics[0], l.topics[1], `0x${to.padStart(62, '0')}`] },
      movedBy({ ...l, topics: [l.topics[0], l.topics[1], `0x${to.padStart(66, '0')}`] }, 1),
    ], /not the event's encoding: topic 2 is no 32-byte word/, 0n);
  }, 120_000);

  it("as a topic of 33 bytes, the merchant's word then one more byte: the run fails with nothing recorded, never paid", async () => {
    const total = 100_060_000n;
    const i = await sent('100.06');
    const logs = await transfer(randomAddress(), total);
    await refusedThenCounted(i, total, logs, (l) => [{ ...l, topics: [l.topics[0], l.topics[1], `0x${merchantA.slice(2).toLowerCase().padStart(64, '0')}00`] }], /not the event's encoding: topic 2 is no 32-byte word/, 0n);
  }, 120_000);
});

describe("the log's contract", () => {
  it('the token and the proxy in other letter case: a genuine payment still counts, once, and a full one pays the invoice once', async () => {
    const total = 100_070_000n;
    const i = await sent('100.07');
    const recase = (l: WireLog): WireLog[] => [{ ...l, address: isLeg(l) ? l.address.toLowerCase() : upper(l.address) }];
    const first = await pay(refOf(i), USDC);
    let served = lie(first, recase);
    await catchUp();
    expect(served()).toBeGreaterThan(0);
    await notPaid(i, USDC);
    proxy.rewrite(null);
    await catchUp();
    await notPaid(i, USDC);
    const rest = await pay(refOf(i), total - USDC, 1);
    served = lie(rest, recase);
    await catchUp();
    expect(served()).toBeGreaterThan(0);
    proxy.rewrite(null);
    await catchUp();
    expect(await inv(i.id)).toMatchObject({ status: 'paid', amount_paid_atomic: total.toString() });
    expect(await counts(i.id)).toMatchObject({ invoicePaid: 1, paidWebhooks: 1, confirmedPayments: 2 });
  }, 120_000);

  it("a copy of the payment claiming the rest, its Transfer the proxy's and its event the token's: only the real 1 USDC counts", async () => {
    const total = 100_080_000n;
    const i = await sent('100.08');
    const logs = await pay(refOf(i), USDC);
    await countedOnce(i, total, logs, (l) => [l, movedBy({ ...claiming(l, total - USDC), address: isLeg(l) ? chain.feeProxy : chain.token }, 0x20)], USDC);
  }, 120_000);
});

describe('a log without its place, claiming the whole invoice', () => {
  const cases: [string, (l: WireLog) => WireLog][] = [
    ['blockHash removed', ({ blockHash: _gone, ...l }) => l as WireLog],
    ['logIndex null', (l) => ({ ...l, logIndex: null })],
    ['transactionHash null', (l) => ({ ...l, transactionHash: null })],
  ];
  it.each(cases)('%s: the run fails with nothing recorded; once the node stops, the real 1 USDC counts', async (_name, unplace) => {
    const total = 100_090_000n + BigInt(cases.findIndex((c) => c[1] === unplace)) * 10_000n;
    const i = await sent((Number(total) / 1e6).toFixed(2));
    const logs = await pay(refOf(i), USDC);
    await refusedThenCounted(i, total, logs, (l) => [unplace(claiming(l, total))], /a log without its place/, USDC);
  }, 120_000);
});

describe('the reference', () => {
  it('the genuine reference topic in upper case hex: the payment still counts for its invoice', async () => {
    const total = 100_210_000n;
    const i = await sent('100.21');
    const logs = await pay(refOf(i), USDC);
    const served = lie(logs, (l) => [isEvent(l) ? { ...l, topics: [l.topics[0], upper(l.topics[1])] } : l]);
    await catchUp();
    expect(served()).toBeGreaterThan(0);
    await notPaid(i, USDC);
    await honestThenPaidOnce(i, total, USDC, 1);
  }, 120_000);
});

describe('a genuine log answered again', () => {
  it("the proxy's event again under another logIndex: it moved nothing more, the 50 USDC count once", async () => {
    const total = 100_220_000n;
    const half = total / 2n;
    const i = await sent('100.22');
    const logs = await pay(refOf(i), half);
    const served = lie(logs, (l) => (isEvent(l) ? [l, movedBy(l, 0x20)] : [l]));
    await catchUp();
    expect(served()).toBeGreaterThan(0);
    await notPaid(i, half);
    await honestThenPaidOnce(i, total, half, 1);
  }, 120_000);

  // Hashes are read in lower case, so the copy is the genuine log itself, answered twice.
  it('the whole payment again, same logIndex, its transaction and block hashes in upper case: the same payment, the half paid counts once', async () => {
    const total = 100_260_000n;
    const half = total / 2n;
    const i = await sent('100.26');
    const logs = await pay(refOf(i), half);
    await countedOnce(i, total, logs, (l) => [l, { ...l, transactionHash: upper(String(l.transactionHash)), blockHash: upper(String(l.blockHash)) }], half);
  }, 120_000);
});

/** Runs of the shared watcher failed by an answer that cannot be the chain's. */
async function lies(): Promise<number> {
  const m = await metrics.registry.getSingleMetric('chain_scan_failures_total')?.get();
  return m?.values.find((v) => v.labels.cause === 'inconsistent_logs')?.value ?? 0;
}

describe('one RPC URL, lying', () => {
  it('a run failed by a mangled answer backs the scan off: the runs meanwhile ask the node nothing; once it is honest the real payment counts, once', async () => {
    const total = 100_400_000n;
    const i = await sent('100.40');
    const logs = await pay(refOf(i), USDC);
    const served = lie(logs, (l) => [isLeg(l) ? { ...l, data: `${l.data}00` } : l]);
    await chain.mine(3);
    const before = await lies();
    await expect(run()).rejects.toThrow(/not the event's encoding/);
    expect(served()).toBeGreaterThan(0);
    expect(await lies()).toBe(before + 1);
    // No other URL to lead with: the next runs wait (a second at first, doubling as in an outage).
    proxy.resetCalls();
    expect(await run()).toBe('backing off after RPC errors');
    expect(proxy.calls()).toBe(0);
    await notPaid(i, 0n);
    // Once the back-off ends the node is asked again; still lying, the run fails again.
    await waitUntil(async () => (await run().catch((err: Error) => err.message)).includes("not the event's encoding"), 10_000, 50);
    expect(await lies()).toBe(before + 2);
    await notPaid(i, 0n);
    await honestThenPaidOnce(i, total, USDC, 1);
  }, 120_000);
});

describe('a quorum of two URLs (CHAIN_RPC_QUORUM=2), the first one lying well-formed', () => {
  let honest: RpcProxy;
  let quorumRun: () => Promise<string>;
  beforeAll(async () => {
    honest = await startRpcProxy(chain.rpcUrl);
    const file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'zz-broken-logs-quorum-')), { rpc_urls: [proxy.url, honest.url] });
    const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log: createLogger('silent'), rpcQuorum: 2 });
    quorumRun = () => watcher.run(chain.chainId);
  });
  afterAll(async () => {
    await honest?.close();
  });
  /** A transfer's Transfer log with its recipient rewritten to the merchant, as a proper word. */
  const toMerchant = (l: WireLog): WireLog[] => [{ ...l, topics: [l.topics[0], l.topics[1], `0x${merchantA.slice(2).toLowerCase().padStart(64, '0')}`] }];

  it('a transfer to another address, its recipient rewritten to the merchant: one URL alone believes it; two refuse it, and nothing counts once the node stops', async () => {
    const other = randomAddress();
    // The limit docs/payments.md names: with one URL (the suite's watcher) the lie pays an invoice.
    const believed = await sent('42.42');
    lie(await transfer(other, 42_420_000n), toMerchant);
    await catchUp();
    expect(await inv(believed.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '42420000' });

    const total = 42_430_000n;
    const i = await sent('42.43');
    const logs = await transfer(other, total);
    const served = lie(logs, toMerchant);
    await expect(catchUp(quorumRun)).rejects.toThrow(/answered different logs/);
    expect(served()).toBeGreaterThan(0);
    await notPaid(i, 0n);
    expect(await rowsOf(logs)).toEqual([]);
    proxy.rewrite(null);
    await catchUp(quorumRun);
    await notPaid(i, 0n);
    expect(await rowsOf(logs)).toEqual([]);
    await pay(refOf(i), total, 2);
    await catchUp(quorumRun);
    expect(await inv(i.id)).toMatchObject({ status: 'paid', amount_paid_atomic: total.toString() });
    expect(await counts(i.id)).toMatchObject({ invoicePaid: 1, paidWebhooks: 1, confirmedPayments: 1 });
  }, 120_000);

  it("a real payment's logs left out of the first URL's answer: two refuse the answer, and the payment counts once the node stops", async () => {
    const total = 42_440_000n;
    const i = await sent('42.44');
    const logs = await pay(refOf(i), total);
    lie(logs, () => []);
    await expect(catchUp(quorumRun)).rejects.toThrow(/answered different logs/);
    await notPaid(i, 0n);
    proxy.rewrite(null);
    await catchUp(quorumRun);
    expect(await inv(i.id)).toMatchObject({ status: 'paid', amount_paid_atomic: total.toString() });
    expect(await counts(i.id)).toMatchObject({ invoicePaid: 1, paidWebhooks: 1, confirmedPayments: 1 });
  }, 120_000);

  it('the first URL writes the same logs otherwise (hex in upper case, with the block time on each): the two agree, and the payment counts once', async () => {
    const total = 42_450_000n;
    const i = await sent('42.45');
    const logs = await pay(refOf(i), total);
    const block = await chain.publicClient.getBlock({ blockHash: String(logs[0].blockHash) as Hex });
    const served = lie(logs, (l) => [{
      ...l, data: upper(l.data), topics: l.topics.map(upper), transactionHash: upper(String(l.transactionHash)), blockHash: upper(String(l.blockHash)),
      blockTimestamp: `0x${block.timestamp.toString(16)}`,
    }]);
    await catchUp(quorumRun);
    expect(served()).toBeGreaterThan(0);
    expect(await inv(i.id)).toMatchObject({ status: 'paid', amount_paid_atomic: total.toString() });
    expect(await counts(i.id)).toMatchObject({ invoicePaid: 1, paidWebhooks: 1, confirmedPayments: 1 });
  }, 120_000);

  it('a quorum of two over one URL scans nothing: the run is refused and the cursor stays', async () => {
    const file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'zz-broken-logs-one-')), { rpc_urls: [honest.url] });
    const alone = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log: createLogger('silent'), rpcQuorum: 2 });
    await chain.mine(5);
    const at = await cursor();
    expect(await alone.run(chain.chainId)).toMatch(/^refused: 1 of chain \d+'s RPC URLs answer its chain id, CHAIN_RPC_QUORUM is 2/);
    expect(await cursor()).toBe(at);
  }, 60_000);
});

describe('two RPC URLs, the first one lying', () => {
  it('a mangled answer from the first URL fails that run; the next runs lead with the second, which tells the truth: the real payment counts, once', async () => {
    const honest = await startRpcProxy(chain.rpcUrl);
    try {
      const file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'zz-broken-logs-two-')), { rpc_urls: [proxy.url, honest.url] });
      const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log: createLogger('silent') });
      const total = 100_300_000n;
      const i = await sent('100.30');
      const logs = await pay(refOf(i), USDC);
      // The merchant's Transfer leg with a byte appended to its amount: no canonical log.
      const served = lie(logs, (l) => [isLeg(l) ? { ...l, data: `${l.data}00` } : l]);
      await chain.mine(3);
      await expect(watcher.run(chain.chainId)).rejects.toThrow(/not the event's encoding/);
      const lies = served();
      expect(lies).toBeGreaterThan(0);
      await notPaid(i, 0n);
      // The first URL still lies; the second leads now, and the first is asked no more logs.
      const safe = (await chain.publicClient.getBlockNumber()) - 2n;
      for (let k = 0; k < 10 && (await cursor()) < safe; k++) await watcher.run(chain.chainId);
      expect(await cursor()).toBeGreaterThanOrEqual(safe);
      expect(served()).toBe(lies);
      await notPaid(i, USDC);
      await honestThenPaidOnce(i, total, USDC, 1);
    } finally {
      await honest.close();
    }
  }, 120_000);
});
