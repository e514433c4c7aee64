// The set-up every end-to-end file on a real chain shares: anvil with the contracts, an SMTP sink,
// the API over a fresh database with CHAINS_FILE naming that chain, a worker watching it every
// 100 ms, and the merchant's sandbox settlement address set. With `listen`, the API also listens on
// a free loopback port that is PAYMENT_PAGE_BASE's origin (for a real browser).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import type { AppDeps } from '../../src/http/types.js';
import type { Config } from '../../src/config.js';
import type { WorkerRuntime, WorkerRuntimeOptions } from '../../src/runtime/worker-runtime.js';
import type { ChainsFileEntry } from '../../src/devchain/chains-file.js';
import { startTestChain, type TestChain } from './anvil.js';
import { startApiFixture, type ApiFixture } from './context.js';
import { apiClient, type ApiClient, type JsonBody } from './http.js';
import { startSmtpSink, type SmtpSink } from './smtp-sink.js';
import { startWorker } from './worker.js';

export interface ChainFixture {
  chain: TestChain;
  fx: ApiFixture;
  sink: SmtpSink;
  worker: WorkerRuntime;
  chainsFile: string;
  /** `http://127.0.0.1:<port>` with `listen`, else null. */
  origin: string | null;
  close(): Promise<void>;
}

export interface ChainFixtureOptions {
  /** The sandbox settlement address set over the API. */
  settlementAddress: string;
  /** Overrides of the chain's CHAINS_FILE entry (explorer_url...). */
  chainsEntry?: Partial<ChainsFileEntry>;
  /** More configuration for the API and the worker. */
  env?: Record<string, string>;
  listen?: boolean;
  /** Dependencies handed to the API (the operator address of subscriptions...). */
  deps?: Partial<AppDeps>;
  /** What the worker runtime is given besides its configuration (a relayer...). */
  worker?: (started: { chain: TestChain; fx: ApiFixture; config: Config }) => WorkerRuntimeOptions;
}

export async function startChainFixture(opts: ChainFixtureOptions): Promise<ChainFixture> {
  // What started so far is stopped, last first, should a later step fail.
  const started: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    for (const stop of started.splice(0).reverse()) await stop().catch(() => undefined);
  };
  try {
    return await start(opts, started, stopAll);
  } catch (err) {
    await stopAll();
    throw err;
  }
}

async function start(opts: ChainFixtureOptions, started: (() => Promise<unknown>)[], stopAll: () => Promise<void>): Promise<ChainFixture> {
  const chain = await startTestChain();
  started.push(() => chain.stop());
  const sink = await startSmtpSink();
  started.push(() => sink.close());
  const chainsFile = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'chain-fixture-')), opts.chainsEntry);
  const port = opts.listen ? await freePort() : null;
  const origin = port === null ? null : `http://127.0.0.1:${port}`;
  const env = {
    SMTP_URL: sink.url,
    CHAINS_FILE: chainsFile,
    CHAIN_POLL_INTERVAL_MS: '100',
    OUTBOX_RELAY_INTERVAL_MS: '100',
    // The tests (and the pages) poll for states: no per-key rate limit in the way.
    RATE_LIMIT_MAX: '1000000',
    ...(origin === null ? {} : { PORT: String(port), PAYMENT_PAGE_BASE: `${origin}/pay` }),
    ...opts.env,
  };
  const fx = await startApiFixture(env, opts.deps);
  started.push(() => fx.close());
  if (port !== null) await fx.api.app.listen({ port, host: '127.0.0.1' });
  const config = fx.env.config(env);
  const worker = await startWorker(config, opts.worker?.({ chain, fx, config }));
  started.push(() => worker.close());
  const set = await apiClient(fx.api.app).patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: opts.settlementAddress });
  expect(set.status, set.raw).toBe(200);
  return {
    chain,
    fx,
    sink,
    worker,
    chainsFile,
    origin,
    close: stopAll,
  };
}

/** A USDC invoice on the local chain, created and sent over the API (so it carries its payment instructions), to a fresh customer unless `email` is given. */
export async function sendLocalInvoice(api: ApiClient, key: string, amount: string, email = `payer-${Math.random().toString(36).slice(2)}@example.test`): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key, { customer_email: email, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key);
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}
