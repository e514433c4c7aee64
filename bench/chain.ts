// `npm run bench:chain -- [--payments 10000] [--blocks 1000] [--open 100000] [--samples 100]`:
// the payment detector on a real chain (anvil, started here) and a throwaway database.
//   1. Throughput: N open invoices (SQL), paid by N payments over B blocks (proxy payments and
//      plain transfers alternating, from the 9 funded payers), mined to the confirmation depth;
//      THEN the watcher (createChainWatcher, run in a loop to the safe head) applies them. Payments
//      applied per second beside the bare Postgres bound of the same run (bareBound: the same
//      payment rows, invoice updates and events by plain batched SQL, no triggers; the median of
//      three, on fresh copies of the tables each time). Target >= 0.5x.
//      The node's side (eth_getLogs with the watcher's two filters) is printed for scale.
//   2. Detection latency: a worker process (CHAIN_POLL_INTERVAL_MS=250, confirmations 2); pay an
//      invoice, mine the blocks that bring it to the depth, and time from the block that reaches
//      it to `paid` (Postgres polled every few ms). Target p99 < 1 s.
//   3. RPC calls per 100 blocks with 10 and with --open open invoices, behind a counting
//      JSON-RPC proxy, the watcher run once per block. Target: equal; the watcher's wall time
//      with --open open invoices <= 1.2x that with 10.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { encodeEventTopics, encodeFunctionData, maxUint256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadChains } from '../src/chains-config.js';
import { ERC20_TRANSFER, FEE_PROXY_ABI, TRANSFER_WITH_REFERENCE_AND_FEE } from '../src/chain/abi.js';
import { createChainWatcher, type ChainWatcher } from '../src/chain/watcher.js';
import { loadConfig } from '../src/config.js';
import { TEST_USDC_ABI } from '../src/devchain/contracts.js';
import { newId } from '../src/domain/ids.js';
import { newPaymentTarget, splitFee } from '../src/domain/payments.js';
import { createLogger } from '../src/log.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import { startRpcProxy, startTestChain, type TestChain } from '../test/helpers/anvil.js';
import {
  backendEnv,
  codeVersion,
  cpuDelta,
  cpuMsOf,
  cpuSnapshot,
  createBenchDatabase,
  fmt,
  loadAvg,
  note,
  openBenchPool,
  percentile,
  randomSuffix,
  REDIS_URL,
  sleep,
  spawnTs,
  table,
  type BenchBackend,
  type BenchDatabase,
  type Child,
} from './support.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';
import { startSmtpSink, type SmtpSink } from '../test/helpers/smtp-sink.js';

const { values: args } = parseArgs({
  options: {
    payments: { type: 'string', default: '10000' },
    blocks: { type: 'string', default: '1000' },
    open: { type: 'string', default: '100000' },
    samples: { type: 'string', default: '100' },
    backend: { type: 'string', default: 'redis' },
  },
});
const N = Number(args.payments);
const B = Number(args.blocks);
const OPEN = Number(args.open);
const SAMPLES = Number(args.samples);
const BACKEND = args.backend as BenchBackend;
if (![N, B, OPEN, SAMPLES].every((x) => Number.isInteger(x) && x > 0) || B > N) throw new Error('--payments, --blocks, --open, --samples: positive integers, blocks <= payments');
if (BACKEND !== 'redis' && BACKEND !== 'postgres') throw new Error(`--backend must be redis or postgres, got "${BACKEND}"`);

/** The depth of the chains file's local chain (LOCAL_CONFIRMATIONS). */
const CONFIRMATIONS = 2;
const POLL_INTERVAL_MS = 250;
const PROXY_GAS = 200_000n;
const TRANSFER_GAS = 80_000n;
/** The raw eth_getLogs pass is run this many times; the median is the limit. */
const RAW_REPEATS = 3;

// ---------------------------------------------------------------------------------------------
// JSON-RPC, bare: the sends and the raw limit go around viem so that neither is the bottleneck.

interface RpcAnswer {
  id: number;
  result?: unknown;
  error?: { code: number; message: string };
}

async function rpcBatch(url: string, calls: { method: string; params: unknown[] }[]): Promise<unknown[]> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(calls.map((c, id) => ({ jsonrpc: '2.0', id, ...c }))),
  });
  const answers = (await res.json()) as RpcAnswer[];
  const byId = new Map(answers.map((a) => [a.id, a]));
  return calls.map((c, id) => {
    const a = byId.get(id);
    if (!a || a.error) throw new Error(`${c.method}: ${a?.error?.message ?? 'no answer'}`);
    return a.result;
  });
}

const rpc = async (url: string, method: string, params: unknown[] = []) => (await rpcBatch(url, [{ method, params }]))[0];
const hex = (n: bigint | number) => `0x${n.toString(16)}`;
const headOf = async (url: string) => BigInt((await rpc(url, 'eth_blockNumber')) as string);
const mineOne = (url: string) => rpc(url, 'evm_mine');

// ---------------------------------------------------------------------------------------------
// The invoices: open, sent to the merchant's settlement address, each with its own reference.

interface Merchant {
  accountId: string;
  customerId: string;
  address: Address;
  feeBps: number;
}

interface OpenInvoice {
  id: string;
  reference: Hex;
  totalAtomic: bigint;
}

async function createMerchant(pool: pg.Pool): Promise<Merchant> {
  const address = privateKeyToAccount(generatePrivateKey()).address;
  const feeBps = 50;
  const { accountId } = await provisionMerchant(pool, { id: newId('acct'), name: 'Bench', email: null, platformFeeBps: feeBps, settlementAddress: address });
  const { rows } = await pool.query<{ id: string }>(
    `insert into customers (id, account_id, environment, email) values ($1, $2, 'sandbox', 'payer@example.test') returning id`,
    [newId('cus'), accountId],
  );
  return { accountId, customerId: rows[0].id, address, feeBps };
}

/** Inserts `count` open invoices with totals first, first + 1, ... (atomic): a plain transfer matches one only. */
async function insertOpenInvoices(pool: pg.Pool, chain: TestChain, m: Merchant, count: number, firstTotalAtomic: bigint): Promise<OpenInvoice[]> {
  const out: OpenInvoice[] = [];
  const BATCH = 5_000;
  for (let start = 0; start < count; start += BATCH) {
    const rows = Array.from({ length: Math.min(BATCH, count - start) }, (_, j) => {
      const id = newId('inv');
      const total = firstTotalAtomic + BigInt(start + j);
      return { id, total, fee: splitFee(total, m.feeBps).feeAtomic, target: newPaymentTarget(id, m.address) };
    });
    await pool.query(
      `insert into invoices (id, account_id, environment, customer_id, reference, status, amount, amount_atomic, fee_atomic, currency,
         network, chain_id, token_address, token_decimals, sent_at, settlement_address, reference_salt, payment_reference,
         payment_reference_topic, fee_bps)
       select t.id, $1, 'sandbox', $2, t.id, 'open', t.total / 1000000.0, t.total, t.fee, 'USDC', 'local', $3, $4, 6, now(), $5,
         t.salt, t.reference, t.topic, $6
       from unnest($7::text[], $8::numeric[], $9::numeric[], $10::text[], $11::text[], $12::text[]) as t (id, total, fee, salt, reference, topic)`,
      [
        m.accountId,
        m.customerId,
        chain.chainId,
        chain.token,
        m.address,
        m.feeBps,
        rows.map((r) => r.id),
        rows.map((r) => r.total.toString()),
        rows.map((r) => r.fee.toString()),
        rows.map((r) => r.target.salt),
        rows.map((r) => r.target.reference),
        rows.map((r) => r.target.referenceTopic),
      ],
    );
    for (const r of rows) out.push({ id: r.id, reference: r.target.reference as Hex, totalAtomic: r.total });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Payments, sent with eth_sendTransaction from anvil's unlocked accounts, explicit nonces and gas
// (with automine off no estimate can see the earlier transactions of the same block).

class Payers {
  private nonces = new Map<Address, bigint>();
  private next = 0;
  constructor(
    private readonly chain: TestChain,
    private readonly feeBps: number,
  ) {}

  /** Each payer approves the proxy once (mined), and the nonces are read. */
  async prepare(): Promise<void> {
    for (const p of this.chain.payers) {
      const data = encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'approve', args: [this.chain.feeProxy, maxUint256] });
      await rpc(this.chain.rpcUrl, 'eth_sendTransaction', [{ from: p.address, to: this.chain.token, data, gas: hex(TRANSFER_GAS) }]);
    }
    await mineOne(this.chain.rpcUrl);
    for (const p of this.chain.payers) this.nonces.set(p.address, BigInt((await rpc(this.chain.rpcUrl, 'eth_getTransactionCount', [p.address, 'pending'])) as string));
  }

  /** The transaction paying `inv` to `to`: a proxy payment with its reference, or a plain transfer of the total. */
  tx(inv: OpenInvoice, to: Address, kind: 'proxy' | 'transfer'): { method: string; params: unknown[] } {
    const payer = this.chain.payers[this.next++ % this.chain.payers.length].address;
    const nonce = this.nonces.get(payer)!;
    this.nonces.set(payer, nonce + 1n);
    const { amountAtomic, feeAtomic } = splitFee(inv.totalAtomic, this.feeBps);
    const call =
      kind === 'proxy'
        ? {
            to: this.chain.feeProxy,
            gas: PROXY_GAS,
            data: encodeFunctionData({
              abi: FEE_PROXY_ABI,
              functionName: 'transferFromWithReferenceAndFee',
              args: [this.chain.token, to, amountAtomic, inv.reference, feeAtomic, this.chain.feeAddress],
            }),
          }
        : { to: this.chain.token, gas: TRANSFER_GAS, data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'transfer', args: [to, inv.totalAtomic] }) };
    return { method: 'eth_sendTransaction', params: [{ from: payer, to: call.to, data: call.data, gas: hex(call.gas), nonce: hex(nonce) }] };
  }
}

// ---------------------------------------------------------------------------------------------
// Where a pass's wall time goes: time with at least one Postgres query in flight, with at least
// one RPC request in flight, and the CPU of this process, the database's backends and anvil.

class Busy {
  private inFlight = 0;
  private since = 0;
  total = 0;
  enter(): void {
    if (this.inFlight++ === 0) this.since = performance.now();
  }
  leave(): void {
    if (--this.inFlight === 0) this.total += performance.now() - this.since;
  }
}

interface Profile {
  pgMs: number;
  rpcMs: number;
  /** With a Postgres query or an RPC request in flight (the watcher reads the next range while it writes one). */
  eitherMs: number;
  statements: Map<string, { n: number; ms: number }>;
  stop(): { pgMs: number; rpcMs: number; eitherMs: number; benchCpuMs: number; pgCpuMs: number; anvilCpuMs: number };
}

/** Patches pg's Client.query and fetch for the duration of one pass (this process runs nothing else meanwhile). */
function startProfile(dbName: string, anvilPid: number): Profile {
  const pgBusy = new Busy();
  const rpcBusy = new Busy();
  const eitherBusy = new Busy();
  const statements = new Map<string, { n: number; ms: number }>();
  const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
  const originalQuery = proto.query;
  const originalFetch = globalThis.fetch;
  proto.query = function (this: unknown, ...a: unknown[]) {
    const result = originalQuery.apply(this, a);
    if (!(result instanceof Promise)) return result;
    const text = typeof a[0] === 'string' ? a[0] : ((a[0] as { text?: string } | undefined)?.text ?? '?');
    const label = text.replace(/\s+/g, ' ').trim().slice(0, 70);
    const t = performance.now();
    pgBusy.enter();
    eitherBusy.enter();
    return result.finally(() => {
      pgBusy.leave();
      eitherBusy.leave();
      const s = statements.get(label) ?? { n: 0, ms: 0 };
      s.n++;
      s.ms += performance.now() - t;
      statements.set(label, s);
    });
  };
  globalThis.fetch = async (...a: Parameters<typeof fetch>) => {
    rpcBusy.enter();
    eitherBusy.enter();
    try {
      const res = await originalFetch(...a);
      // viem reads the body after this resolves: read it here so its transfer counts as RPC.
      const body = await res.arrayBuffer();
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      rpcBusy.leave();
      eitherBusy.leave();
    }
  };
  const cpu0 = process.cpuUsage();
  const pg0 = cpuSnapshot(new RegExp(`postgres: .*${dbName}`));
  const anvil0 = cpuMsOf(anvilPid);
  return {
    get pgMs() {
      return pgBusy.total;
    },
    get rpcMs() {
      return rpcBusy.total;
    },
    get eitherMs() {
      return eitherBusy.total;
    },
    statements,
    stop() {
      proto.query = originalQuery;
      globalThis.fetch = originalFetch;
      const cpu = process.cpuUsage(cpu0);
      return {
        pgMs: pgBusy.total,
        rpcMs: rpcBusy.total,
        eitherMs: eitherBusy.total,
        benchCpuMs: (cpu.user + cpu.system) / 1000,
        pgCpuMs: cpuDelta(pg0, cpuSnapshot(new RegExp(`postgres: .*${dbName}`))),
        anvilCpuMs: cpuMsOf(anvilPid) - anvil0,
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------

function tmpDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'bench-chain-'));
}

async function cursorOf(pool: pg.Pool, chainId: number): Promise<bigint> {
  const { rows } = await pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chainId]);
  return rows[0] ? BigInt(rows[0].block_number) : -1n;
}

/** Runs the watcher until its cursor reaches the safe head of the chain as it is now; returns the runs. */
async function catchUp(watcher: ChainWatcher, pool: pg.Pool, chain: TestChain, rpcUrl = chain.rpcUrl): Promise<number> {
  const safe = (await headOf(rpcUrl)) - BigInt(CONFIRMATIONS);
  let runs = 0;
  while ((await cursorOf(pool, chain.chainId)) < safe) {
    const outcome = await watcher.run(chain.chainId);
    runs++;
    if (outcome.startsWith('scan failed') || outcome.startsWith('backing off')) throw new Error(`watcher: ${outcome}`);
  }
  return runs;
}

const countWhere = async (pool: pg.Pool, sql: string, params: unknown[]) => (await pool.query<{ n: number }>(sql, params)).rows[0].n;

interface ThroughputResult {
  appliedPerS: number;
  seconds: number;
  bare: Awaited<ReturnType<typeof bareBound>>;
  rawPerS: number;
  rawMs: number[];
  logs: number;
  runs: number;
  sendS: number;
  profile: ReturnType<Profile['stop']>;
  topStatements: [string, { n: number; ms: number }][];
}

async function throughput(db: BenchDatabase, pool: pg.Pool, chain: TestChain, m: Merchant, maxBlocks: number): Promise<ThroughputResult> {
  note(`throughput: inserting ${N} open invoices`);
  const invoices = await insertOpenInvoices(pool, chain, m, N, 10_000_000n);
  const payers = new Payers(chain, m.feeBps);
  await payers.prepare();
  await chain.testClient.setAutomine(false);

  const perBlock = Math.ceil(N / B);
  const first = (await headOf(chain.rpcUrl)) + 1n;
  note(`throughput: sending ${N} payments, ${perBlock} a block, from block ${first}`);
  const sendStart = performance.now();
  for (let i = 0; i < N; i += perBlock) {
    const txs = invoices.slice(i, i + perBlock).map((inv, j) => payers.tx(inv, m.address, (i + j) % 2 === 0 ? 'proxy' : 'transfer'));
    await rpcBatch(chain.rpcUrl, txs);
    await mineOne(chain.rpcUrl);
  }
  const last = await headOf(chain.rpcUrl);
  for (let i = 0; i < CONFIRMATIONS; i++) await mineOne(chain.rpcUrl);
  const sendS = (performance.now() - sendStart) / 1000;
  note(`throughput: blocks ${first}-${last} mined in ${sendS.toFixed(1)} s`);

  // ---- the raw limit: the watcher's two filters, over the same ranges, bare JSON-RPC ----
  const [proxyTopic] = encodeEventTopics({ abi: [TRANSFER_WITH_REFERENCE_AND_FEE], eventName: 'TransferWithReferenceAndFee' });
  const transferTopics = encodeEventTopics({ abi: [ERC20_TRANSFER], eventName: 'Transfer', args: { to: m.address } });
  const rawPass = async (): Promise<{ ms: number; proxyLogs: number; transferLogs: number }> => {
    const t = performance.now();
    let proxyLogs = 0;
    let transferLogs = 0;
    for (let from = first; from <= last; from += BigInt(maxBlocks)) {
      const to = from + BigInt(maxBlocks) - 1n > last ? last : from + BigInt(maxBlocks) - 1n;
      const range = { fromBlock: hex(from), toBlock: hex(to) };
      const [p, tr] = await Promise.all([
        rpc(chain.rpcUrl, 'eth_getLogs', [{ ...range, address: chain.feeProxy, topics: [proxyTopic] }]),
        rpc(chain.rpcUrl, 'eth_getLogs', [{ ...range, address: [chain.token], topics: transferTopics }]),
      ]);
      proxyLogs += (p as unknown[]).length;
      transferLogs += (tr as unknown[]).length;
    }
    return { ms: performance.now() - t, proxyLogs, transferLogs };
  };
  const raws = [];
  for (let i = 0; i < RAW_REPEATS; i++) raws.push(await rawPass());
  const proxies = Math.ceil(N / 2);
  // Every payment moves the token to the merchant (a proxy payment too): N transfers, N/2 proxy events.
  if (raws[0].proxyLogs !== proxies || raws[0].transferLogs !== N) {
    throw new Error(`expected ${proxies} proxy and ${N} transfer logs, got ${raws[0].proxyLogs} and ${raws[0].transferLogs}: some payments reverted`);
  }
  const rawMs = raws.map((r) => r.ms);
  const rawPerS = N / (percentile(rawMs, 50) / 1000);
  note(`throughput: raw eth_getLogs ${rawMs.map((x) => x.toFixed(0)).join(' / ')} ms for ${N} payments (${proxies + N} logs)`);

  // ---- the watcher, started after the payments are final ----
  const chainsFile = chain.writeChainsFile(tmpDir(), { start_block: Number(first) });
  const watcher = createChainWatcher({ pool, chains: loadChains(chainsFile, {}), maxBlocks, log: createLogger('silent') });
  // The tables the watcher reads and writes, vacuumed and analysed as the bound's copies are (and
  // as autovacuum leaves them after a bulk insert; it may be off on a bench machine): both sides
  // planned from the same statistics.
  // A checkpoint first, on this side and before each of the bound's: neither starts while the other's
  // WAL is being flushed (the bound's median moved from 1.1 to 1.5 s between runs without it).
  await pool.query('vacuum analyze invoices, payments, events');
  await pool.query('checkpoint');
  note('throughput: watcher catching up');
  const since = (await pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0].now;
  const profile = startProfile(db.name, chain.anvil.pid);
  const t0 = performance.now();
  const runs = await catchUp(watcher, pool, chain);
  const seconds = (performance.now() - t0) / 1000;
  const usage = profile.stop();
  const paid = await countWhere(pool, `select count(*)::int as n from invoices where status = 'paid' and id = any($1)`, [invoices.map((i) => i.id)]);
  const applied = await countWhere(pool, `select count(*)::int as n from payments where outcome = 'applied'`, []);
  if (paid !== N || applied !== N) throw new Error(`after the catch-up: ${paid} of ${N} invoices paid, ${applied} payments applied`);
  note(`throughput: ${N} applied in ${seconds.toFixed(2)} s (${runs} runs)`);
  // The ranges the watcher wrote, one transaction each: their last blocks are the cursor's checkpoints.
  const { rows: cursorRows } = await pool.query<{ checkpoints: [string, string][] }>('select checkpoints from chain_cursors where chain_id = $1', [chain.chainId]);
  const rangeEnds = cursorRows[0].checkpoints.map(([b]) => BigInt(b)).filter((b) => b >= first);
  const bare = await bareBound(pool, invoices.map((i) => i.id), since, rangeEnds);
  note(`throughput: bare Postgres bound ${bare.ms.toFixed(0)} ms (${bare.payments} payments, ${bare.invoices} invoices, ${bare.events} events, ${bare.ranges} ranges)`);
  return {
    appliedPerS: N / seconds,
    seconds,
    bare,
    rawPerS,
    rawMs,
    logs: proxies + N,
    runs,
    sendS,
    profile: usage,
    topStatements: [...profile.statements.entries()].sort((a, b) => b[1].ms - a[1].ms).slice(0, 8),
  };
}

/**
 * The bare Postgres bound of the watcher's writes, same run: the payment rows, the invoice
 * updates and the events the watcher wrote, written again by plain batched SQL (one transaction
 * per range the watcher recorded, one statement per table) into copies of the three tables with
 * their columns, constraints and indexes but no triggers and no foreign keys. Nothing is computed:
 * the rows are read back from what the watcher wrote (untimed), so the figure is the database's
 * floor for the same work, beside which the detector's own cost (reads, matching, triggers,
 * per-event functions) shows.
 */
/** Times the bare bound is measured in a run; the median is the figure (one measurement moved by ±20% between runs). */
const BARE_REPEATS = 3;

async function bareBound(pool: pg.Pool, invoiceIds: string[], since: Date, rangeEnds: bigint[]): Promise<{ ms: number; all: number[]; payments: number; invoices: number; events: number; ranges: number }> {
  const { rows: payments } = await pool.query<{ row: Record<string, unknown>; block: string }>(
    `select to_jsonb(p) as row, p.block_number::text as block from payments p where p.created_at >= $1 order by p.id`,
    [since],
  );
  const { rows: invoices } = await pool.query<{ id: string; amount_paid_atomic: string; status: string; paid_at: Date | null; block: string }>(
    `select i.id, i.amount_paid_atomic::text, i.status::text, i.paid_at,
       (select max(p.block_number) from payments p where p.invoice_id = i.id)::text as block
     from invoices i where i.id = any($1)`,
    [invoiceIds],
  );
  const { rows: events } = await pool.query<{ row: Record<string, unknown>; object_id: string }>(
    `select to_jsonb(e) as row, e.object_id from events e where e.created_at >= $1 order by e.created_at, e.id`,
    [since],
  );
  // The watcher's ranges (each one transaction), by their last blocks.
  const rangeOf = (block: string | null) => (block === null ? 0 : Math.max(0, rangeEnds.findIndex((end) => BigInt(block) <= end)));
  const blockOf = new Map<string, string>();
  for (const p of payments) blockOf.set(p.row.id as string, p.block);
  for (const i of invoices) if (i.block !== null) blockOf.set(i.id, i.block);
  const ranges = new Map<number, { payments: unknown[]; invoices: unknown[]; events: unknown[] }>();
  const at = (k: number) => {
    let r = ranges.get(k);
    if (!r) ranges.set(k, (r = { payments: [], invoices: [], events: [] }));
    return r;
  };
  for (const p of payments) at(rangeOf(p.block)).payments.push(p.row);
  for (const i of invoices) at(rangeOf(i.block)).invoices.push({ id: i.id, amount_paid_atomic: i.amount_paid_atomic, status: i.status, paid_at: i.paid_at });
  for (const e of events) at(rangeOf(blockOf.get(e.object_id) ?? null)).events.push(e.row);
  const all: number[] = [];
  for (let repeat = 0; repeat < BARE_REPEATS; repeat++) {
    await pool.query(`create table bare_payments (like payments including defaults including constraints including indexes)`);
    await pool.query(`create table bare_invoices (like invoices including defaults including constraints including indexes)`);
    await pool.query(`create table bare_events (like events including defaults including constraints including indexes)`);
    try {
      // The invoices as they were before the watcher paid them.
      await pool.query(`insert into bare_invoices select * from invoices where id = any($1)`, [invoiceIds]);
      await pool.query(`update bare_invoices set status = 'open', amount_paid_atomic = 0, paid_at = null`);
      await pool.query('vacuum analyze bare_invoices');
      await pool.query('checkpoint');
      const client = await pool.connect();
      const t = performance.now();
      try {
        for (const k of [...ranges.keys()].sort((a, b) => a - b)) {
          const r = ranges.get(k)!;
          await client.query('begin');
          await client.query(`insert into bare_payments select * from jsonb_populate_recordset(null::bare_payments, $1::jsonb)`, [JSON.stringify(r.payments)]);
          await client.query(
            `update bare_invoices i set amount_paid_atomic = x.amount_paid_atomic, status = x.status::invoice_status, paid_at = coalesce(x.paid_at, i.paid_at),
               updated_at = clock_timestamp()
             from jsonb_to_recordset($1::jsonb) as x (id text, amount_paid_atomic numeric, status text, paid_at timestamptz) where i.id = x.id`,
            [JSON.stringify(r.invoices)],
          );
          await client.query(`insert into bare_events select * from jsonb_populate_recordset(null::bare_events, $1::jsonb)`, [JSON.stringify(r.events)]);
          await client.query('commit');
        }
      } finally {
        client.release();
      }
      all.push(performance.now() - t);
    } finally {
      await pool.query('drop table bare_payments, bare_invoices, bare_events');
    }
  }
  return { ms: percentile(all, 50), all, payments: payments.length, invoices: invoices.length, events: events.length, ranges: ranges.size };
}

interface CallsResult {
  open: number;
  byMethod: Map<string, number>;
  total: number;
  watcherMs: number;
}

const METHODS = ['eth_blockNumber', 'eth_getBlockByNumber', 'eth_getLogs'];

async function rpcCalls(pool: pg.Pool, chain: TestChain, m: Merchant, maxBlocks: number): Promise<CallsResult[]> {
  const proxy = await startRpcProxy(chain.rpcUrl);
  try {
    const chainsFile = chain.writeChainsFile(tmpDir(), { rpc_urls: [proxy.url] });
    const watcher = createChainWatcher({ pool, chains: loadChains(chainsFile, {}), maxBlocks, log: createLogger('silent') });
    await catchUp(watcher, pool, chain, proxy.url);
    // One run before counting: a watcher's first run checks its RPC URL's chain id once
    // (eth_chainId); with the cursor already caught up, catchUp runs nothing, and that one call
    // fell into the first pass's count alone.
    await watcher.run(chain.chainId);
    const payers = new Payers(chain, m.feeBps);
    await payers.prepare();
    const out: CallsResult[] = [];
    let firstTotal = 50_000_000n;
    for (const open of [10, OPEN]) {
      const have = await countWhere(pool, `select count(*)::int as n from invoices where status in ('open', 'overdue') and chain_id = $1`, [chain.chainId]);
      note(`rpc calls: ${open} open invoices (inserting ${Math.max(2, open - have)})`);
      const invoices = await insertOpenInvoices(pool, chain, m, Math.max(2, open - have), firstTotal);
      firstTotal += BigInt(open);
      // Each pass's 100 blocks hold one proxy payment and one plain transfer, to invoices of its own.
      const [a, b] = invoices.slice(-2);
      proxy.resetCalls();
      const t = performance.now();
      for (let i = 0; i < 100; i++) {
        if (i === 10) await rpcBatch(chain.rpcUrl, [payers.tx(a, m.address, 'proxy'), payers.tx(b, m.address, 'transfer')]);
        await mineOne(chain.rpcUrl);
        const outcome = await watcher.run(chain.chainId);
        if (outcome.startsWith('scan failed') || outcome.startsWith('backing off')) throw new Error(`watcher: ${outcome}`);
      }
      const watcherMs = performance.now() - t;
      const paid = await countWhere(pool, `select count(*)::int as n from invoices where status = 'paid' and id = any($1)`, [[a.id, b.id]]);
      if (paid !== 2) throw new Error(`rpc calls pass with ${open} open: ${paid} of 2 payments applied`);
      const byMethod = new Map(METHODS.map((k) => [k, proxy.calls(k)]));
      const other = proxy.calls() - METHODS.reduce((s, k) => s + proxy.calls(k), 0);
      if (other > 0) byMethod.set('other', other);
      out.push({ open, byMethod, total: proxy.calls(), watcherMs });
    }
    return out;
  } finally {
    await proxy.close();
  }
}

interface LatencyResult {
  ms: number[];
  /** Of each: from the confirming block to the worker's confirmation of the payment (its clock, this machine's). */
  toConfirmMs: number[];
}

async function latency(chain: TestChain, sink: SmtpSink): Promise<LatencyResult> {
  const db = await createBenchDatabase({ queueSchema: BACKEND === 'postgres' });
  const prefix = `bench-chain-${randomSuffix()}`;
  const pool = openBenchPool(db.url, 3);
  const outbox = tmpDir();
  let worker: Child | null = null;
  try {
    const m = await createMerchant(pool);
    const invoices = await insertOpenInvoices(pool, chain, m, SAMPLES, 20_000_000n);
    const payers = new Payers(chain, m.feeBps);
    await payers.prepare();
    // The earlier passes' blocks are not this merchant's: the scan starts at the head.
    const chainsFile = chain.writeChainsFile(outbox, { start_block: Number(await headOf(chain.rpcUrl)) });
    worker = spawnTs('worker', 'main/worker.ts', [], {
      DATABASE_URL: db.url,
      ...backendEnv(BACKEND, prefix),
      CHAINS_FILE: chainsFile,
      CHAIN_POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
      SMTP_URL: sink.url,
      WORKER_PORT: '0',
      LOG_LEVEL: 'warn',
    });
    // Ready once its first scan has written the cursor.
    const deadline = Date.now() + 60_000;
    while ((await cursorOf(pool, chain.chainId)) < 0n) {
      if (Date.now() > deadline) throw new Error(`worker wrote no chain cursor within 60 s:\n${worker.tail()}`);
      await sleep(50);
    }
    const ms: number[] = [];
    const toConfirm: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const inv = invoices[i];
      await rpcBatch(chain.rpcUrl, [payers.tx(inv, m.address, i % 2 === 0 ? 'proxy' : 'transfer')]);
      await mineOne(chain.rpcUrl); // the payment's block b
      // Blocks come at no fixed phase of the worker's polls.
      await sleep(Math.random() * POLL_INTERVAL_MS);
      await mineOne(chain.rpcUrl);
      await sleep(Math.random() * POLL_INTERVAL_MS);
      await mineOne(chain.rpcUrl); // b + 2: the payment reaches the depth (b <= head - 2)
      const mined = performance.now();
      const minedAt = Date.now();
      for (;;) {
        const { rows } = await pool.query<{ status: string }>('select status from invoices where id = $1', [inv.id]);
        if (rows[0].status === 'paid') break;
        if (performance.now() - mined > 30_000) throw new Error(`invoice ${inv.id} not paid 30 s after its confirming block:\n${worker.tail()}`);
        await sleep(3);
      }
      ms.push(performance.now() - mined);
      const { rows } = await pool.query<{ t: number }>('select (extract(epoch from confirmed_at) * 1000)::float8 as t from payments where invoice_id = $1', [inv.id]);
      toConfirm.push(rows[0].t - minedAt);
    }
    note(`latency: ${SAMPLES} samples, p50 ${fmt(percentile(ms, 50), 0)} ms, p99 ${fmt(percentile(ms, 99), 0)} ms`);
    return { ms, toConfirmMs: toConfirm };
  } finally {
    await worker?.stop();
    await pool.end();
    if (BACKEND === 'redis') await deleteRedisPrefix(REDIS_URL, prefix);
    await db.drop();
    rmSync(outbox, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const header = `bench:chain --payments ${N} --blocks ${B} --open ${OPEN} --samples ${SAMPLES} --backend ${BACKEND}; ${os.cpus().length} cpus, ${loadAvg()}, ${codeVersion()}`;
  note(header);
  const db = await createBenchDatabase();
  // CHAIN_GETLOGS_MAX_BLOCKS's default: the raw limit asks for the ranges the watcher asks for.
  const maxBlocks = loadConfig({ DATABASE_URL: db.url }).chainGetLogsMaxBlocks;
  const pool = openBenchPool(db.url, 5);
  let chain: TestChain | null = null;
  const sink = await startSmtpSink();
  try {
    chain = await startTestChain();
    const m = await createMerchant(pool);
    const tp = await throughput(db, pool, chain, m, maxBlocks);
    const calls = await rpcCalls(pool, chain, m, maxBlocks);
    const lat = await latency(chain, sink);

    const barePerS = N / (tp.bare.ms / 1000);
    const ratio = tp.appliedPerS / barePerS;
    const wallRatio = calls[1].watcherMs / calls[0].watcherMs;
    const p99 = percentile(lat.ms, 99);
    const [few, many] = calls;
    const equal = few.total === many.total && METHODS.every((k) => few.byMethod.get(k) === many.byMethod.get(k));
    const byMethod = (c: CallsResult) => [...c.byMethod.entries()].map(([k, v]) => `${k.replace(/^eth_/, '')} ${v}`).join(', ');
    const rows: (string | number)[][] = [
      [`throughput: payments applied/s (${N} over ${B} blocks)`, fmt(tp.appliedPerS, 0), `${fmt(barePerS, 0)} bare Postgres`, `${fmt(ratio, 2)}x`, '>= 0.5x', ratio >= 0.5 ? 'met' : 'NOT MET'],
      [
        `detection latency ms p50 / p99 / max (${lat.ms.length}, poll ${POLL_INTERVAL_MS} ms)`,
        `${fmt(percentile(lat.ms, 50), 0)} / ${fmt(p99, 0)} / ${fmt(Math.max(...lat.ms), 0)}`,
        '-',
        '-',
        'p99 < 1000',
        p99 < 1000 ? 'met' : 'NOT MET',
      ],
      [`watcher wall ms per 100 blocks, ${few.open} vs ${many.open} open`, `${fmt(few.watcherMs, 0)} vs ${fmt(many.watcherMs, 0)}`, '-', `${fmt(wallRatio, 2)}x`, '<= 1.2x', wallRatio <= 1.2 ? 'met' : 'NOT MET'],
      [`RPC calls per 100 blocks, ${few.open} vs ${many.open} open`, `${few.total} vs ${many.total}`, '-', `${fmt(many.total / few.total, 2)}x`, 'equal', equal ? 'met' : 'NOT MET'],
    ];
    const p = tp.profile;
    const wall = tp.seconds * 1000;
    const lines = [
      header,
      '',
      table(['figure', 'project', 'raw limit (same run)', 'ratio', 'target', ''], rows),
      '',
      `Throughput: ${N} payments (${Math.ceil(N / 2)} proxy, ${Math.floor(N / 2)} plain transfers) sent and mined in ${fmt(tp.sendS, 1)} s; the watcher applied them in ${fmt(tp.seconds, 2)} s (${tp.runs} runs, ${tp.bare.ranges} ranges of up to ${maxBlocks} blocks, fewer when an answer is over viem's 10 MB).`,
      `  bare Postgres bound: the same ${tp.bare.payments} payment rows, ${tp.bare.invoices} invoice updates and ${tp.bare.events} events by plain batched SQL (${tp.bare.ranges} transaction(s), one statement per table, no triggers): ${fmt(tp.bare.ms, 0)} ms (median of ${tp.bare.all.map((ms) => fmt(ms, 0)).join(' / ')})`,
      `  for scale, the node's side: the watcher's two eth_getLogs filters over the same blocks, bare JSON-RPC: ${tp.rawMs.map((x) => fmt(x, 0)).join(' / ')} ms (median of ${RAW_REPEATS}) for ${tp.logs} logs = ${fmt(tp.rawPerS, 0)} payments/s`,
      `  watcher wall ${fmt(wall, 0)} ms: Postgres in flight ${fmt(p.pgMs, 0)} ms (${fmt((p.pgMs / wall) * 100, 0)}%), RPC in flight ${fmt(p.rpcMs, 0)} ms (${fmt((p.rpcMs / wall) * 100, 0)}%), both at once ${fmt(p.pgMs + p.rpcMs - p.eitherMs, 0)} ms, neither ${fmt(wall - p.eitherMs, 0)} ms`,
      `  CPU: bench process (watcher JS) ${fmt(p.benchCpuMs, 0)} ms, Postgres backends ${fmt(p.pgCpuMs, 0)} ms, anvil ${fmt(p.anvilCpuMs, 0)} ms`,
      '  statements by time (ms, calls):',
      ...tp.topStatements.map(([s, v]) => `    ${fmt(v.ms, 0).padStart(7)}  ${String(v.n).padStart(5)}  ${s}`),
      `Latency: of which block -> the worker's scan confirms the payment (its confirmed_at) p50 ${fmt(percentile(lat.toConfirmMs, 50), 0)} / p99 ${fmt(percentile(lat.toConfirmMs, 99), 0)} ms; the rest is its commit and this bench's poll (every 3 ms)`,
      '',
      'RPC calls per 100 blocks (the watcher run once per block; one proxy payment and one transfer among them):',
      ...calls.map((c) => `  ${String(c.open).padStart(7)} open invoices: ${c.total} calls (${byMethod(c)}), watcher ${fmt(c.watcherMs, 0)} ms`),
      '',
      `${loadAvg()}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await chain?.stop();
    await sink.close();
    await pool.end();
    await db.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
