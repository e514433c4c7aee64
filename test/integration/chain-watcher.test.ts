// The payment detector against an unfriendly provider and unfriendly operations, on a real chain
// (anvil) behind a real JSON-RPC proxy: a provider that refuses eth_getLogs ranges wider than 50
// blocks, a provider that goes down and comes back (the backlog is found, the worker stays ready
// and keeps sending email), the same number of eth_getLogs calls with 1 and with 1,000 open
// invoices, and worker processes SIGKILLed mid-scan or racing each other: one row and one event
// per payment, whatever happens.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { createLogger } from '../../src/log.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startRpcProxy, startTestChain, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { spawnWorker, startWorker, waitUntil, workerProcessEnv, type WorkerProcess } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  chain = await startTestChain();
  sink = await startSmtpSink();
  fx = await startApiFixture({ SMTP_URL: sink.url, CHAINS_FILE: chain.writeChainsFile(tmpDir()), RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
}, 120_000);
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  await fx?.close();
  await sink?.close();
  await chain?.stop();
});

function tmpDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'chain-watcher-'));
}

/** A chains file naming this chain behind `rpcUrl` (the proxy). */
function chainsFileVia(rpcUrl: string): string {
  return chain.writeChainsFile(tmpDir(), { rpc_urls: [rpcUrl] });
}

async function proxy(opts: { maxLogRange?: number } = {}): Promise<RpcProxy> {
  const p = await startRpcProxy(chain.rpcUrl, opts);
  cleanups.push(() => p.close());
  return p;
}

async function sentInvoice(amount: string, email = `payer-${Math.random().toString(36).slice(2)}@example.test`): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key(), { customer_email: email, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

const statusOf = async (id: string): Promise<string> => (await api.get(`/v1/invoices/${id}`, key())).body.data.status;

function pay(inv: JsonBody) {
  const pi = inv.payment_instructions;
  return chain.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
}

async function cursorBlock(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].block_number) : -1n;
}

/** Runs the watcher until its cursor reaches the safe head (head - 2) of the chain as it is now. */
async function catchUp(run: () => Promise<string>): Promise<void> {
  const safe = (await chain.publicClient.getBlockNumber()) - 2n;
  for (let i = 0; i < 200 && (await cursorBlock()) < safe; i++) await run();
  expect(await cursorBlock()).toBeGreaterThanOrEqual(safe);
}

describe('an unfriendly provider', () => {
  it('refusing eth_getLogs ranges wider than 50 blocks: the ranges shrink and the backlog is found', async () => {
    const rpc = await proxy({ maxLogRange: 50 });
    const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(chainsFileVia(rpc.url), {}), maxBlocks: 2000, log: createLogger('silent') });
    const invoices = [await sentInvoice('1.00'), await sentInvoice('2.00'), await sentInvoice('3.00')];
    await pay(invoices[0]);
    await chain.mine(120);
    await chain.transfer({ to: merchant, amountAtomic: 2_000_000n });
    await chain.mine(120);
    await pay(invoices[2]);
    await chain.mine(3);
    await catchUp(() => watcher.run(chain.chainId));
    for (const inv of invoices) expect(await statusOf(inv.id)).toBe('paid');
    expect(rpc.refusedLogRanges()).toBeGreaterThan(0);
  });

  it('a pending window deeper than the provider allows is read in ranges: a payment is pending at once', async () => {
    const rpc = await proxy({ maxLogRange: 5 });
    const file = chain.writeChainsFile(tmpDir(), { rpc_urls: [rpc.url], confirmations: 12 });
    const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks: 2000, log: createLogger('silent') });
    const inv = await sentInvoice('1.50');
    await chain.mine(10);
    const paid = await pay(inv);
    await chain.mine(3);
    await watcher.run(chain.chainId);
    await watcher.run(chain.chainId);
    const [p] = (await api.get(`/v1/invoices/${inv.id}/payments`, key())).body.data as JsonBody[];
    expect(p).toMatchObject({ tx_hash: paid.txHash, status: 'pending', confirmations: 3 });
    expect(rpc.refusedLogRanges()).toBeGreaterThan(0);
  });

  it('the same number of eth_getLogs calls per 100 blocks with 1 and with 1,000 open invoices', async () => {
    const rpc = await proxy();
    const watcher = createChainWatcher({ pool: fx.api.pool, chains: loadChains(chainsFileVia(rpc.url), {}), maxBlocks: 2000, log: createLogger('silent') });
    const run = () => watcher.run(chain.chainId);
    const one = await sentInvoice('4.00');
    await catchUp(run);
    const callsOver100Blocks = async () => {
      rpc.resetCalls();
      await chain.mine(100);
      await catchUp(run);
      return rpc.calls('eth_getLogs');
    };
    const withOne = await callsOver100Blocks();
    // 999 more open invoices sent to the same address, each with a reference of its own.
    await fx.api.pool.query(
      `insert into invoices (id, account_id, environment, customer_id, code, reference, status, amount, amount_atomic, fee_atomic, currency,
         network, chain_id, token_address, token_decimals, sent_at, settlement_address, reference_salt, payment_reference, payment_reference_topic, fee_bps)
       select i.id || '_' || g, i.account_id, i.environment, i.customer_id, i.code || '-' || g, i.reference || g, 'open', i.amount, i.amount_atomic,
         i.fee_atomic, i.currency, i.network, i.chain_id, i.token_address, i.token_decimals, i.sent_at, i.settlement_address, i.reference_salt,
         '0x' || lpad(to_hex(g), 16, '0'), '0x' || lpad(to_hex(g), 64, '0'), i.fee_bps
       from invoices i cross join generate_series(1, 999) g where i.id = $1`,
      [one.id],
    );
    const { rows } = await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from invoices where status = 'open' and chain_id = $1 and account_id = $2`, [chain.chainId, fx.merchant.accountId]);
    expect(rows[0].n).toBeGreaterThanOrEqual(1_000);
    const withThousand = await callsOver100Blocks();
    expect(withOne).toBeGreaterThan(0);
    expect(withThousand).toBe(withOne);
  });

  it('failing the next range while a range is written (it is read ahead): the written range stays, the run fails, the next run goes on from it, each payment once', async () => {
    const rpc = await proxy();
    const watcherVia = () => createChainWatcher({ pool: fx.api.pool, chains: loadChains(chainsFileVia(rpc.url), {}), maxBlocks: 20, log: createLogger('silent') });
    await catchUp(() => watcherVia().run(chain.chainId));
    const start = await cursorBlock();
    const invoices = [await sentInvoice('6.01'), await sentInvoice('6.02'), await sentInvoice('6.03')];
    const txs = [(await pay(invoices[0])).txHash];
    await chain.mine(30);
    txs.push((await pay(invoices[1])).txHash);
    await chain.mine(30);
    txs.push((await pay(invoices[2])).txHash);
    await chain.mine(3);
    // Every range that begins after start + 20 fails; the first payment is in one that begins before.
    rpc.rewrite((req) => {
      const from = (req.params?.[0] as { fromBlock?: string } | undefined)?.fromBlock;
      return req.method === 'eth_getLogs' && from !== undefined && BigInt(from) > start + 20n
        ? { jsonrpc: '2.0' as const, id: req.id ?? null, error: { code: -32603, message: 'internal error' } }
        : undefined;
    });
    const failing = watcherVia();
    expect(await failing.run(chain.chainId)).toMatch(/^scan failed \(outage/);
    // The ranges grow from 2 blocks (a sixteenth of 20, doubled after each answer): the cursor is
    // at the end of the last one begun by start + 20, past the first payment, short of the second.
    const [b1, b2] = await Promise.all(txs.slice(0, 2).map(async (hash) => (await chain.publicClient.getTransactionReceipt({ hash })).blockNumber));
    const stopped = await cursorBlock();
    expect(stopped).toBeGreaterThanOrEqual(b1);
    expect(stopped).toBeLessThan(b2);
    expect(await Promise.all(invoices.map((i) => statusOf(i.id)))).toEqual(['paid', 'open', 'open']);
    rpc.rewrite(null);
    await catchUp(() => watcherVia().run(chain.chainId));
    expect(await Promise.all(invoices.map((i) => statusOf(i.id)))).toEqual(['paid', 'paid', 'paid']);
    const { rows } = await fx.api.pool.query<{ tx_hash: string; rows: number; events: number }>(
      `select p.tx_hash, count(distinct p.id)::int as rows, count(e.id)::int as events
       from payments p left join events e on e.object_id = p.id and e.type = 'payment.confirmed'
       where p.tx_hash = any($1) group by p.tx_hash order by p.tx_hash`,
      [txs],
    );
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r, r.tx_hash).toMatchObject({ rows: 1, events: 1 });
  });
});

describe('a provider down, then back', () => {
  let worker: WorkerRuntime | undefined;
  afterEach(async () => {
    await worker?.close();
    worker = undefined;
  });

  it('backs off without failing the worker: it stays ready, sends email, and finds the backlog once the provider is back', async () => {
    const rpc = await proxy();
    const env = { SMTP_URL: sink.url, CHAINS_FILE: chainsFileVia(rpc.url), CHAIN_POLL_INTERVAL_MS: '100', OUTBOX_RELAY_INTERVAL_MS: '100', WORKER_PORT: '0' };
    worker = await startWorker(fx.env.config(env));
    const port = (worker.http.server.address() as { port: number }).port;
    const inv = await sentInvoice('5.00', 'down@example.test');
    await rpc.down('refuse');
    await pay(inv);
    await chain.mine(3);
    const errors = async () => (await worker!.metrics.registry.getSingleMetric('chain_rpc_calls_total')!.get()).values.filter((v) => v.labels.outcome === 'error').reduce((a, v) => a + v.value, 0);
    await waitUntil(async () => (await errors()) > 0, 20_000);
    // The invoice email still goes out, and readiness is not the chain's business.
    await waitUntil(async () => sink.messages.some((m) => recipientsOf(m).includes('down@example.test')), 20_000);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(await statusOf(inv.id)).toBe('open');
    await rpc.up();
    await waitUntil(async () => (await statusOf(inv.id)) === 'paid', 60_000);
  });
});

describe('worker processes', () => {
  const spawned = (env: Record<string, string>): WorkerProcess => {
    const p = spawnWorker(workerProcessEnv(fx.env.config({ SMTP_URL: sink.url }), env));
    cleanups.push(() => p.stop('SIGKILL'));
    return p;
  };

  it('one SIGKILLed mid-scan, then two at once: one row and one event per payment', async () => {
    const env = { CHAINS_FILE: chain.writeChainsFile(tmpDir()), CHAIN_POLL_INTERVAL_MS: '100', CHAIN_GETLOGS_MAX_BLOCKS: '2', LOG_LEVEL: 'warn' };
    const start = await chain.publicClient.getBlockNumber();
    const invoices: JsonBody[] = [];
    const txs: string[] = [];
    for (let i = 0; i < 8; i++) {
      const inv = await sentInvoice(`${6 + i}.00`);
      invoices.push(inv);
      txs.push((await pay(inv)).txHash);
      await chain.mine(40);
    }
    const first = spawned(env);
    // Killed as soon as it has recorded part of the backlog, never at a chosen instant.
    await waitUntil(async () => (await cursorBlock()) > start + 20n, 60_000, 10);
    await first.stop('SIGKILL');
    expect(await cursorBlock()).toBeLessThan(await chain.publicClient.getBlockNumber());
    spawned(env);
    spawned(env);
    await waitUntil(async () => (await Promise.all(invoices.map((i) => statusOf(i.id)))).every((s) => s === 'paid'), 90_000);
    const { rows } = await fx.api.pool.query<{ tx_hash: string; rows: number; confirmed: number; paid: number }>(
      `select p.tx_hash, count(distinct p.id)::int as rows,
         (select count(*)::int from events e where e.object_id = min(p.id) and e.type = 'payment.confirmed') as confirmed,
         (select count(*)::int from events e where e.object_id = min(p.invoice_id) and e.type = 'invoice.paid') as paid
       from payments p where p.tx_hash = any($1) group by p.tx_hash`,
      [txs],
    );
    expect(rows).toHaveLength(8);
    for (const r of rows) expect(r).toMatchObject({ rows: 1, confirmed: 1, paid: 1 });
  }, 180_000);
});
