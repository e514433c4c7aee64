// The payment detector against a node that lies or lags, on a real chain (anvil) behind a real
// JSON-RPC proxy that rewrites some answers (issue 24, findings 3, 4, 5 and 10; issue 25, "errors
// are not swallowed"): a range whose logs are over viem's response size limit, a head behind the
// cursor, a head of 10^12, an RPC URL of another chain, a worker configured with another token
// list, and each class of failure (a range refusal, a rate limit, an outage, a database error).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KINDS } from '../../src/chain/kinds/index.js';
import { ONE_BLOCK_MAX_BYTES } from '../../src/chain/rpc.js';
import { loadChains } from '../../src/chains-config.js';
import { createChainWatcher, type ChainWatcherOptions } from '../../src/chain/watcher.js';
import type { Pool } from '../../src/db/pool.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { startRpcProxy, startTestChain, type JsonRpcRequest, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const cleanups: (() => Promise<unknown>)[] = [];

/** keccak256("Transfer(address,address,uint256)"): a token transfer's topic 0. */
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
/** More than viem's default response size limit (10 MiB). */
const OVERSIZED = 11 * 1024 * 1024;

beforeAll(async () => {
  chain = await startTestChain();
  fx = await startApiFixture({ CHAINS_FILE: chain.writeChainsFile(tmpDir()), RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
  await chain.mine(30);
}, 120_000);
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  await fx?.close();
  await chain?.stop();
});

function tmpDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'chain-lying-node-'));
}

async function proxy(): Promise<RpcProxy> {
  const p = await startRpcProxy(chain.rpcUrl);
  cleanups.push(() => p.close());
  return p;
}

interface Watched {
  run: () => Promise<string>;
  /** The log lines of info and above, parsed. */
  lines: Record<string, unknown>[];
  metric: (name: string, labels?: Record<string, string>) => Promise<number>;
}

/** A watcher of the test chain through `rpcUrls` (default: a proxy's), with its own metrics and captured log. */
function watcherOf(opts: { file: string; chainId?: number; pool?: Pool; maxBlocks?: number }): Watched {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  const metrics = createMetrics({ queues: [], db: fx.api.pool, defaultMetrics: false });
  const options: ChainWatcherOptions = { pool: opts.pool ?? fx.api.pool, chains: loadChains(opts.file, {}), maxBlocks: opts.maxBlocks ?? 2000, log, metrics: metrics.chain };
  const watcher = createChainWatcher(options);
  return {
    run: () => watcher.run(opts.chainId ?? chain.chainId),
    lines,
    metric: async (name, labels = {}) => {
      const values = (await metrics.registry.getSingleMetric(name)!.get()).values;
      return values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x)).reduce((a, v) => a + v.value, 0);
    },
  };
}

/**
 * A node that forwards to anvil, except that it answers any eth_getLogs of transfers over `block`
 * with a body that never ends (1 MiB at a time, as fast as the reader takes it) until stop().
 */
async function endlessNodeFor(block: bigint): Promise<{ url: string; largestAnswer(): number; stop(): void }> {
  let lying = true;
  let largest = 0;
  const chunk = Buffer.alloc(1024 * 1024, 0x20);
  const endless = (res: ServerResponse) => {
    let sent = 0;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"jsonrpc":"2.0","id":1,"result":[');
    const more = () => {
      while (!res.destroyed) {
        sent += chunk.length;
        largest = Math.max(largest, sent);
        if (!res.write(chunk)) return void res.once('drain', more);
      }
    };
    more();
  };
  const asksBlock = (item: JsonRpcRequest) => {
    if (item.method !== 'eth_getLogs') return false;
    const f = item.params?.[0] as { fromBlock?: string; toBlock?: string; topics?: unknown[] };
    return f.topics?.[0] === TRANSFER_TOPIC && f.fromBlock !== undefined && f.toBlock !== undefined && BigInt(f.fromBlock) <= block && BigInt(f.toBlock) >= block;
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      const parsed = JSON.parse(body) as JsonRpcRequest | JsonRpcRequest[];
      if (lying && (Array.isArray(parsed) ? parsed : [parsed]).some(asksBlock)) return endless(res);
      fetch(chain.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (answer) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text()))
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  cleanups.push(() => new Promise((ok) => server.close(ok)));
  cleanups.push(async () => void server.closeAllConnections());
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    largestAnswer: () => largest,
    stop: () => void (lying = false),
  };
}

const fileVia = (url: string, overrides: Parameters<TestChain['writeChainsFile']>[1] = {}) => chain.writeChainsFile(tmpDir(), { rpc_urls: [url], ...overrides });

async function sentInvoice(amount: string): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key(), { customer_email: `payer-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

const statusOf = async (id: string): Promise<string> => (await api.get(`/v1/invoices/${id}`, key())).body.data.status;
const paymentsOf = async (id: string): Promise<JsonBody[]> => (await api.get(`/v1/invoices/${id}/payments`, key())).body.data as JsonBody[];

function pay(inv: JsonBody) {
  const pi = inv.payment_instructions;
  return chain.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
}

async function cursorOf(chainId = chain.chainId): Promise<{ block: bigint; head: bigint | null }> {
  const { rows } = await fx.api.pool.query<{ block_number: string; head_block: string | null }>(
    'select block_number::text, head_block::text from chain_cursors where chain_id = $1',
    [chainId],
  );
  return rows[0] ? { block: BigInt(rows[0].block_number), head: rows[0].head_block === null ? null : BigInt(rows[0].head_block) } : { block: -1n, head: null };
}

/** Runs the watcher until its cursor reaches the safe head (head - 2) of the chain as it is now; a bounded number of runs. */
async function catchUp(run: () => Promise<string>): Promise<void> {
  const safe = (await chain.publicClient.getBlockNumber()) - 2n;
  const outcomes: string[] = [];
  for (let i = 0; i < 100 && (await cursorOf()).block < safe; i++) outcomes.push(await run());
  expect((await cursorOf()).block, outcomes.slice(-3).join(' | ')).toBeGreaterThanOrEqual(safe);
}

async function eventTypesOf(objectId: string): Promise<string[]> {
  const { rows } = await fx.api.pool.query<{ type: string }>('select type from events where object_id = $1 order by created_at, id', [objectId]);
  return rows.map((r) => r.type);
}

const hex = (n: bigint) => `0x${n.toString(16)}`;
const answer = (req: JsonRpcRequest, result: unknown) => ({ jsonrpc: '2.0' as const, id: req.id ?? null, result });
const failure = (req: JsonRpcRequest, code: number, message: string) => ({ jsonrpc: '2.0' as const, id: req.id ?? null, error: { code, message } });

describe('a range whose logs are over the response size limit (zero-value transfer spam)', () => {
  it('shrinks to one block, then one address at a time: the cursor moves on and a real payment after the spam is found', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    // The spam: a real zero-value Transfer to the settlement address; the node answers any
    // eth_getLogs of transfers over its block with more than viem reads (as 24,000 such logs did).
    const spam = await chain.transfer({ to: merchant, amountAtomic: 0n });
    rpc.rewrite(async (req, real) => {
      if (req.method !== 'eth_getLogs') return undefined;
      const f = req.params?.[0] as { fromBlock: string; toBlock: string; topics?: unknown[] };
      if (f.topics?.[0] !== TRANSFER_TOPIC || BigInt(f.fromBlock) > spam.blockNumber || BigInt(f.toBlock) < spam.blockNumber) return undefined;
      return { ...(await real()), padding: ' '.repeat(OVERSIZED) };
    });
    await chain.mine(5);
    const inv = await sentInvoice('7.00');
    await pay(inv);
    await chain.mine(3);
    await catchUp(w.run);
    expect(await statusOf(inv.id)).toBe('paid');
    expect(await w.metric('chain_rpc_calls_total', { method: 'eth_getLogs', outcome: 'range_refused' })).toBeGreaterThan(0);
    // Down to the spam's block alone, read one address at a time.
    expect(w.lines.filter((l) => String(l.msg).startsWith('one block refused or over the size limit')).map((l) => l.block)).toContain(spam.blockNumber.toString());
  }, 120_000);

  it("an endless answer for one block's logs: the run fails once 128 MiB are read, not the worker's memory; once the node stops, the block is read and a later payment counts", async () => {
    const spam = await chain.transfer({ to: merchant, amountAtomic: 0n });
    const node = await endlessNodeFor(spam.blockNumber);
    const w = watcherOf({ file: fileVia(node.url) });
    await chain.mine(5);
    // Down to the block, then its one address, read under one block's limit, and refused.
    let outcome = '';
    for (let i = 0; i < 40 && !/scan failed/.test(outcome); i++) outcome = await w.run();
    expect(outcome).toMatch(/scan failed \(range/);
    expect((await cursorOf()).block).toBe(spam.blockNumber - 1n);
    expect(w.lines.filter((l) => String(l.msg).startsWith('one block refused or over the size limit')).map((l) => l.block)).toContain(spam.blockNumber.toString());
    // Read whole, the answer went on until the request's timeout (15 s, gigabytes on loopback).
    expect(node.largestAnswer()).toBeGreaterThan(ONE_BLOCK_MAX_BYTES);
    expect(node.largestAnswer()).toBeLessThan(ONE_BLOCK_MAX_BYTES + 64 * 1024 * 1024);
    node.stop();
    const inv = await sentInvoice('7.25');
    await pay(inv);
    await chain.mine(3);
    // Once the run's back-off (1 s) is over.
    await waitUntil(async () => (await w.run(), (await statusOf(inv.id)) === 'paid'), 20_000);
  }, 120_000);

  it('chain_lag_blocks grows while the cursor does not move, when every scan fails', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    expect(await w.metric('chain_lag_blocks')).toBe(0);
    rpc.rewrite((req) => (req.method === 'eth_getLogs' ? failure(req, -32603, 'internal error') : undefined));
    await chain.mine(20);
    const before = (await cursorOf()).block;
    const outcome = await w.run();
    expect(await w.metric('chain_lag_blocks')).toBeGreaterThanOrEqual(18);
    expect((await cursorOf()).block).toBe(before);
    expect(outcome).toMatch(/scan failed \(outage/);
  });
});

describe('a node behind the cursor', () => {
  it('a head 6 to 10 blocks behind is a lagging node: no rescan from the start, no payment.removed; the payment goes pending -> confirmed', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    const inv = await sentInvoice('8.00');
    await pay(inv);
    await w.run();
    const [pending] = await paymentsOf(inv.id);
    expect(pending).toMatchObject({ status: 'pending' });
    const cursor = (await cursorOf()).block;

    // The node lags 6 to 10 blocks for a few runs.
    let behind = 6n;
    rpc.rewrite(async (req, real) => {
      if (req.method !== 'eth_blockNumber') return undefined;
      const head = BigInt((await real()).result as string);
      return answer(req, hex(head - behind));
    });
    for (; behind <= 10n; behind++) {
      expect(await w.run()).toMatch(/behind the cursor .*waiting/);
      expect((await cursorOf()).block).toBe(cursor);
    }
    rpc.rewrite(null);

    await chain.mine(2);
    await w.run();
    expect(await statusOf(inv.id)).toBe('paid');
    expect(await eventTypesOf(pending.id)).toEqual(['payment.pending', 'payment.confirmed']);
    expect((await cursorOf()).block).toBeGreaterThan(cursor);
    expect(await w.metric('chain_scan_failures_total', { cause: 'lagging_node' })).toBe(5);
    // One warning for the whole streak.
    expect(w.lines.filter((l) => String(l.msg).includes('behind the cursor'))).toHaveLength(1);
  });

  it('a reorg deeper than the confirmations rewinds to the fork point found by hash, not to the start block', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    // Several runs a block apart: checkpoints below the cursor.
    for (let i = 0; i < 6; i++) {
      await chain.mine(1);
      await catchUp(w.run);
    }
    const cursor = (await cursorOf()).block;
    await chain.reorg(4);
    const outcome = await w.run();
    const back = BigInt(/rewound to (\d+)/.exec(outcome)?.[1] ?? '-1');
    expect(back, outcome).toBeGreaterThan(cursor - 8n);
    expect(back).toBeLessThan(cursor - 1n);
  });
});

describe('a head that is not believed', () => {
  it('eth_blockNumber = 10^12 for a few runs: nothing is scanned to it or recorded; afterwards payments are pending and confirm as usual', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    const real = await chain.publicClient.getBlockNumber();
    rpc.resetCalls();
    rpc.rewrite((req) => (req.method === 'eth_blockNumber' ? answer(req, hex(10n ** 12n)) : undefined));
    for (let i = 0; i < 3; i++) expect(await w.run()).toMatch(/head 1000000000000 not believed/);
    expect(rpc.calls('eth_getLogs')).toBe(0);
    expect((await cursorOf()).head).toBeLessThanOrEqual(real);
    rpc.rewrite(null);

    const inv = await sentInvoice('9.00');
    const paid = await pay(inv);
    await w.run();
    const [p] = await paymentsOf(inv.id);
    expect(p).toMatchObject({ tx_hash: paid.txHash, status: 'pending', confirmations: 0 });
    await chain.mine(2);
    await w.run();
    expect(await statusOf(inv.id)).toBe('paid');
    expect((await paymentsOf(inv.id))[0]).toMatchObject({ status: 'confirmed', confirmations: 2 });
  });

  it('a head recorded before that the chain has no block for is forgotten', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    await fx.api.pool.query('update chain_cursors set head_block = 1000000000000 where chain_id = $1', [chain.chainId]);
    const inv = await sentInvoice('9.50');
    await pay(inv);
    await w.run();
    expect((await paymentsOf(inv.id))[0]).toMatchObject({ status: 'pending', confirmations: 0 });
    expect((await cursorOf()).head).toBe(await chain.publicClient.getBlockNumber());
  });
});

describe('what an RPC URL and a worker are for', () => {
  it('a chains-file entry for chain 1 pointing at a node of chain 31337 is refused with the URL (redacted) and both ids, and never used', async () => {
    const rpc = await proxy();
    const url = `${rpc.url}/v3/SECRETKEY?apikey=hunter2`;
    const file = path.join(tmpDir(), 'chains.json');
    writeFileSync(file, JSON.stringify([{ chain_id: 1, rpc_urls: [url] }]));
    const w = watcherOf({ file, chainId: 1 });
    expect(await w.run()).toMatch(/refused: no RPC URL of chain 1 answers chain id 1/);
    expect(await w.run()).toMatch(/refused/);
    const [line, ...more] = w.lines.filter((l) => String(l.msg).startsWith('RPC URL'));
    expect(more).toHaveLength(0);
    expect(line.msg).toBe(`RPC URL http://127.0.0.1:${rpc.port}/*** answers chain id 31337, not 1: it is never used for chain 1`);
    expect(JSON.stringify(w.lines)).not.toMatch(/SECRETKEY|hunter2/);
    expect(rpc.calls('eth_chainId')).toBe(1);
    expect(rpc.calls()).toBe(1);
    expect(await cursorOf(1)).toEqual({ block: -1n, head: null });
  });

  it('a URL that answers another chain id after an outage (on reconnect) is refused too', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    await rpc.down('refuse');
    expect(await w.run()).toMatch(/scan failed \(outage/);
    // Back, but now in front of another chain.
    await rpc.up();
    rpc.rewrite((req) => (req.method === 'eth_chainId' ? answer(req, '0x1') : undefined));
    await chain.mine(3);
    const cursor = (await cursorOf()).block;
    let outcome = '';
    await waitUntil(async () => /refused/.test((outcome = await w.run())), 20_000);
    expect(outcome).toBe('refused: no RPC URL of chain 31337 answers chain id 31337');
    expect(w.lines.some((l) => l.msg === `RPC URL http://127.0.0.1:${rpc.port} answers chain id 1, not 31337: it is never used for chain 31337`)).toBe(true);
    expect((await cursorOf()).block).toBe(cursor);
  });

  it('a worker whose chains file lists no token neither moves the shared cursor past a real payment nor scans silently', async () => {
    const full = watcherOf({ file: chain.writeChainsFile(tmpDir()) });
    await catchUp(full.run);
    const inv = await sentInvoice('11.00');
    // A plain transfer of the exact amount: only a worker watching the token sees it.
    await chain.transfer({ to: merchant, amountAtomic: 11_000_000n });
    await chain.mine(3);
    const cursor = (await cursorOf()).block;
    const tokenless = watcherOf({ file: chain.writeChainsFile(tmpDir(), { tokens: [] }) });
    expect(await tokenless.run()).toMatch(/refused: the cursor of chain 31337 was scanned for another set \(tokens 0x[0-9a-f]{40} \(not watched by this worker\)\)/);
    expect((await cursorOf()).block).toBe(cursor);
    expect(tokenless.lines.filter((l) => l.level === 50)).toHaveLength(1);
    expect(await tokenless.metric('chain_scan_failures_total', { cause: 'watched_set' })).toBe(1);
    await catchUp(full.run);
    expect(await statusOf(inv.id)).toBe('paid');
  });
});

describe('a worker watching more tokens', () => {
  afterEach(async () => {
    await fx.api.pool.query('update chain_cursors set scanned_for = null where chain_id = $1', [chain.chainId]);
  });

  it('takes the cursor over (it skips nothing the cursor was scanned for); a worker with the narrower set is then refused', async () => {
    const usual = watcherOf({ file: chain.writeChainsFile(tmpDir()) });
    await catchUp(usual.run);
    const more = chain.chainsFileEntry().tokens.concat({ currency: 'DAI', address: '0x000000000000000000000000000000000000dEaD', decimals: 18 });
    const wider = watcherOf({ file: chain.writeChainsFile(tmpDir(), { tokens: more }) });
    await chain.mine(3);
    expect(await wider.run()).toMatch(/^scanned to/);
    expect(wider.lines.some((l) => String(l.msg).includes('takes the cursor over'))).toBe(true);
    expect(await usual.run()).toMatch(/refused: the cursor of chain 31337 was scanned for another set/);
  });
});

describe('errors are not swallowed', () => {
  it('a rate limit (-32005 naming no range) backs off: the range is not halved', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    await chain.mine(10);
    rpc.resetCalls();
    rpc.rewrite((req) => (req.method === 'eth_getLogs' ? failure(req, -32005, 'daily request count exceeded, request rate limited') : undefined));
    const outcome = await w.run();
    // One batch of eth_getLogs (one call per kind of log), never a second, narrower one.
    expect(rpc.calls('eth_getLogs')).toBeLessThanOrEqual(KINDS.length);
    expect(outcome).toMatch(/scan failed \(rate_limit/);
    expect(await w.metric('chain_scan_failures_total', { cause: 'rate_limit' })).toBe(1);
    expect(await w.metric('chain_rpc_calls_total', { outcome: 'rate_limited' })).toBeGreaterThan(0);
  });

  it('HTTP 429 is a rate limit; an outage is one warning with the real error (class, cause, stack), and the backlog is found afterwards', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    await rpc.down('http429');
    expect(await w.run()).toMatch(/scan failed \(rate_limit/);
    await rpc.up();
    await rpc.down('refuse');
    await chain.mine(5);
    // Runs through the backoff until the outage is met twice.
    await waitUntil(async () => {
      await w.run();
      return (await w.metric('chain_scan_failures_total', { cause: 'outage' })) >= 2;
    }, 30_000);
    const warnings = w.lines.filter((l) => l.msg === 'chain RPC failing; backing off');
    expect(warnings.map((l) => l.cause)).toEqual(['rate_limit', 'outage']);
    const err = warnings[1].err as { type: string; message: string; stack: string };
    expect(err.type).toBe('HttpRequestError');
    expect(err.stack).toMatch(/HttpRequestError: HTTP request failed/);
    expect(err.stack.split('\n').length).toBeGreaterThan(2);
    await rpc.up();
    const inv = await sentInvoice('12.00');
    await pay(inv);
    await chain.mine(3);
    await waitUntil(async () => {
      await w.run();
      return (await statusOf(inv.id)) === 'paid';
    }, 60_000);
  }, 120_000);

  it('a refused range shrinks (a refusal naming a range, even with -32005)', async () => {
    const rpc = await proxy();
    const w = watcherOf({ file: fileVia(rpc.url) });
    await catchUp(w.run);
    await chain.mine(40);
    rpc.rewrite((req) => {
      if (req.method !== 'eth_getLogs') return undefined;
      const f = req.params?.[0] as { fromBlock: string; toBlock: string };
      return BigInt(f.toBlock) - BigInt(f.fromBlock) + 1n > 10n ? failure(req, -32005, 'query returned more than 10000 results') : undefined;
    });
    await catchUp(w.run);
    expect(await w.metric('chain_rpc_calls_total', { outcome: 'range_refused' })).toBeGreaterThan(0);
    expect(await w.metric('chain_scan_failures_total')).toBe(0);
  });

  it('a Postgres error fails the run loudly (its stack, a metric) instead of a warning and a completed job', async () => {
    const rpc = await proxy();
    const pool = fx.api.pool;
    // The real pool, whose reads of the watched addresses name a table that does not exist: a real Postgres error.
    const broken = Object.create(pool) as Pool;
    broken.connect = pool.connect.bind(pool) as Pool['connect'];
    broken.query = ((text: string, params?: unknown[]) => pool.query(text.replace('from settlement_addresses', 'from settlement_addresses_gone'), params)) as Pool['query'];
    const w = watcherOf({ file: fileVia(rpc.url), pool: broken });
    await expect(w.run()).rejects.toThrow(/relation "settlement_addresses_gone" does not exist/);
    expect(await w.metric('chain_scan_failures_total', { cause: 'bug' })).toBe(1);
    const [line] = w.lines.filter((l) => l.msg === 'chain scan failed');
    expect(line.level).toBe(50);
    expect((line.err as { stack: string }).stack).toMatch(/settlement_addresses_gone/);
  });
});

describe('a chain started over', () => {
  it('a new chain with the same addresses (npm run chain -- --fresh) is told by its block 0 and scanned from the start', async () => {
    const fresh = await startTestChain();
    cleanups.push(() => fresh.stop());
    expect(fresh.feeProxy).toBe(chain.feeProxy);
    const w = watcherOf({ file: fresh.writeChainsFile(tmpDir()) });
    const before = (await cursorOf()).block;
    const inv = await sentInvoice('13.00');
    const pi = inv.payment_instructions;
    await fresh.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
    await fresh.mine(3);
    expect(await fresh.publicClient.getBlockNumber()).toBeLessThan(before);
    expect(await w.run()).toMatch(/after a restart of the chain/);
    for (let i = 0; i < 10 && (await statusOf(inv.id)) !== 'paid'; i++) await w.run();
    expect(await statusOf(inv.id)).toBe('paid');
  });
});
