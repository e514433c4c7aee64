// The shared set-up of bench:send's passes: the drafts and how they are sent, the API process, the
// database and queue of one backend, the worker processes and their job statistics.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Job } from 'bullmq';
import pg from 'pg';
import { loadInvoiceForMail } from '../../src/db/invoice-for-mail.js';
import { BUILT_IN_CHAINS } from '../../src/domain/chains.js';
import type { InvoiceDocument } from '../../src/domain/invoice-document.js';
import { MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS } from '../../src/domain/invoice-limits.js';
import { loadConfig } from '../../src/config.js';
import { queueBackendOf, type AppQueue, type QueueBackend } from '../../src/queue/backend.js';
import { QUEUES } from '../../src/queue/catalogue.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { freePort } from '../../src/lib/free-port.js';
import { deleteRedisPrefix } from '../../test/helpers/redis-keys.js';
import type { SmtpSink } from '../../test/helpers/smtp-sink.js';
import {
  backendEnv,
  createBenchDatabase,
  DEFAULT_PG,
  note,
  openBenchPool,
  percentile,
  randomSuffix,
  REDIS_URL,
  sleep,
  spawnTs,
  waitForHttp,
  type BenchBackend,
  type BenchDatabase,
  type Child,
} from '../support.js';

export const PAYMENT_PAGE_BASE = 'https://pay.example.com/pay';

/** A max pass run with BENCH_CPU_PROF: whose profiles to summarise in the report. */
export interface ProfiledPass {
  label: string;
  tag: string;
  invoices: number;
}

// The benchmark

const SERVICES = [
  'Backend integration',
  'Smart-contract audit review',
  'Checkout UI design',
  'Webhook consumer hardening',
  'On-call support (business hours)',
  'Settlement reconciliation',
  'Wallet connect QA',
  'Documentation and onboarding guide for the merchant operations team, including the refund runbook',
];

export function lineItems(seed: number) {
  return Array.from({ length: 20 }, (_, i) => ({
    description: `${SERVICES[(seed + i) % SERVICES.length]} — sprint ${(i % 6) + 1}, ticket #${4100 + i}`,
    quantity: ((seed + i) % 12) + 1,
    unit_amount: `${75 + ((seed * 7 + i * 13) % 300)}.${String((i * 37) % 100).padStart(2, '0')}`,
  }));
}

/** An invoice at the line-item cap: MAX_LINE_ITEMS lines, each description MAX_LINE_DESCRIPTION
 * characters of ordinary words (so pdfkit wraps it as it would a real one). */
export function capLineItems(seed: number) {
  return Array.from({ length: MAX_LINE_ITEMS }, (_, i) => {
    let text = `${SERVICES[(seed + i) % SERVICES.length]} — sprint ${(i % 6) + 1}, ticket #${4100 + i}:`;
    for (let k = 0; text.length < MAX_LINE_DESCRIPTION; k++) text += ` ${SERVICES[(seed + i + k) % SERVICES.length].toLowerCase()}`;
    return {
      description: text.slice(0, MAX_LINE_DESCRIPTION),
      quantity: ((seed + i) % 12) + 1,
      unit_amount: `${75 + ((seed * 7 + i * 13) % 300)}.${String((i * 37) % 100).padStart(2, '0')}`,
    };
  });
}

export interface Draft {
  id: string;
  email: string;
}

export class Api {
  constructor(
    readonly base: string,
    readonly key: string,
  ) {}

  async call(method: string, url: string, body?: object): Promise<{ status: number; json: { data?: { id: string }; error?: unknown } }> {
    const res = await fetch(`${this.base}${url}`, {
      method,
      headers: { 'api-key': this.key, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as { data?: { id: string } }) : {} };
  }

  async createDrafts(tag: string, n: number, concurrency = 8, items: (seed: number) => object[] = lineItems): Promise<Draft[]> {
    const dueAt = new Date(Date.now() + 30 * 86_400_000).toISOString();
    const drafts: Draft[] = new Array(n);
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) {
          const i = next++;
          const email = `c-${tag}-${i}@bench.example`;
          const res = await this.call('POST', '/v1/invoices', {
            customer_email: email,
            customer_name: `Customer ${tag} ${i}`,
            due_at: dueAt,
            memo: 'Thank you for your business. Payment within 30 days of the invoice date, please.',
            footer: 'Bench Merchant GmbH · Musterstraße 1 · 10115 Berlin · Commercial register HRB 123456',
            tax_id: 'DE123456789',
            line_items: items(i),
          });
          if (res.status !== 200 || !res.json.data) throw new Error(`create draft: ${res.status} ${JSON.stringify(res.json)}`);
          drafts[i] = { id: res.json.data.id, email };
        }
      }),
    );
    return drafts;
  }
}

export interface SendRecord {
  start: number;
  httpMs: number;
  status: number;
}

async function sendOne(api: Api, d: Draft, out: Map<string, SendRecord>): Promise<void> {
  const start = performance.now();
  let status: number;
  try {
    status = (await api.call('POST', `/v1/invoices/${d.id}/send`)).status;
  } catch {
    status = -1;
  }
  out.set(d.email, { start, httpMs: performance.now() - start, status });
}

/** As fast as possible with `concurrency` requests in flight. */
export async function sendFlat(api: Api, drafts: Draft[], concurrency: number, out: Map<string, SendRecord>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < drafts.length) await sendOne(api, drafts[next++], out);
    }),
  );
}

/** Open loop at a fixed rate (requests launched on schedule, not after the previous answer). */
export async function sendAtRate(api: Api, drafts: Draft[], perSecond: number, out: Map<string, SendRecord>): Promise<number> {
  const t0 = performance.now();
  const inFlight = new Set<Promise<void>>();
  let maxLagMs = 0;
  for (let i = 0; i < drafts.length; i++) {
    const due = t0 + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    maxLagMs = Math.max(maxLagMs, performance.now() - due);
    const p = sendOne(api, drafts[i], out).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 256) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return maxLagMs;
}

export interface Env {
  backend: BenchBackend;
  db: BenchDatabase;
  prefix: string;
  sink: SmtpSink;
  api: Api;
  apiChild: Child;
  queue: AppQueue;
  /** BENCH_CPU_PROF: directory for the workers' V8 CPU profiles of the max passes. */
  profileDir: string | null;
  /** The profiled passes of the whole run, every backend's (appended by runPass). */
  profiles: ProfiledPass[];
}

/** `extra`: environment on top (PDF_RENDER_THREADS, WORKER_PORT) for every worker of the pass. */
export function startWorkers(env: Env, count: number, concurrency: number, profileTag: string | null, extra: Record<string, string> = {}): Child[] {
  return Array.from({ length: count }, (_, i) =>
    spawnTs(
      `worker ${i + 1}`,
      'main/worker.ts',
      [],
      {
        DATABASE_URL: env.db.url,
        ...backendEnv(env.backend, env.prefix),
        SMTP_URL: env.sink.url,
        // The bench sends with a sandbox key: sandbox mail goes to SANDBOX_SMTP_URL only.
        SANDBOX_SMTP_URL: env.sink.url,
        WORKER_CONCURRENCY: String(concurrency),
        WORKER_PORT: '0',
        LOG_LEVEL: 'warn',
        PAYMENT_PAGE_BASE,
        ...extra,
      },
      profileTag && env.profileDir ? ['--cpu-prof', '--cpu-prof-dir', path.join(env.profileDir, `${profileTag}-${i + 1}`)] : [],
    ),
  );
}

export async function waitForWorkers(queue: AppQueue, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await queue.getWorkersCount()) < count) {
    if (Date.now() > deadline) throw new Error(`only ${await queue.getWorkersCount()} of ${count} workers registered after 60 s`);
    await sleep(100);
  }
}

export async function jobStats(queue: AppQueue, invoiceIds: Set<string>): Promise<{ runP50: number; runP99: number; waitP50: number; failed: number }> {
  const jobs = (await queue.getJobs(['completed', 'failed'], 0, -1)) as Job<{ invoiceId: string }>[];
  const mine = jobs.filter((j) => j && invoiceIds.has(j.data.invoiceId));
  const runs = mine.filter((j) => j.finishedOn && j.processedOn).map((j) => j.finishedOn! - j.processedOn!);
  const waits = mine.filter((j) => j.processedOn).map((j) => j.processedOn! - j.timestamp);
  return { runP50: percentile(runs, 50), runP99: percentile(runs, 99), waitP50: percentile(waits, 50), failed: mine.filter((j) => j.failedReason).length };
}

/** The render threads a worker starts with when the bench does not set them (PDF_RENDER_THREADS
 * from this process's environment, else the config default). */
export function defaultPdfThreads(): number {
  try {
    return loadConfig({ ...process.env, DATABASE_URL: process.env.DATABASE_URL ?? DEFAULT_PG }).pdfRenderThreads;
  } catch {
    return Math.min(4, os.availableParallelism());
  }
}

export interface BackendRun {
  env: Env;
  cleanup(): Promise<void>;
}

/** One backend's database, queue handle and API process (workers come and go per pass). */
export async function openBackend(backend: BenchBackend, sink: SmtpSink, tmp: string, profiles: ProfiledPass[]): Promise<BackendRun & { pool: pg.Pool; keys: { sandbox: string } }> {
  const db = await createBenchDatabase({ queueSchema: backend === 'postgres' });
  const prefix = `bench_send_${randomSuffix()}`;
  const pool = openBenchPool(db.url, 4);
  const queues: QueueBackend = queueBackendOf(loadConfig({ DATABASE_URL: db.url, ...backendEnv(backend, prefix) }), 'producer');
  const queue = queues.queue(QUEUES.send);
  let apiChild: Child | null = null;
  const cleanup = async () => {
    await apiChild?.stop().catch(() => undefined);
    await queue.close().catch(() => undefined);
    await queues.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await db.drop().catch((err) => note(`could not drop ${db.name}: ${err}`));
    const keys = backend === 'redis' ? await deleteRedisPrefix(REDIS_URL, prefix).catch(() => -1) : 0;
    note(`${backend}: cleaned up: database ${db.name} dropped${backend === 'redis' ? `, ${keys} Redis keys under ${prefix}: deleted` : ''}`);
  };
  try {
    const { keys } = await provisionMerchant(pool, { id: 'acct_bench', name: 'Bench Merchant GmbH', email: 'billing@bench-merchant.example', timeZone: 'Europe/Berlin' });
    const port = await freePort();
    apiChild = spawnTs(`api (${backend})`, 'main/api.ts', [], {
      DATABASE_URL: db.url,
      ...backendEnv(backend, prefix),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '1000000000',
      PAYMENT_PAGE_BASE,
    });
    await waitForHttp(`http://127.0.0.1:${port}/v1/invoices/x`);
    const api = new Api(`http://127.0.0.1:${port}`, keys.sandbox);
    const env: Env = { backend, db, prefix, sink, api, apiChild, queue, profileDir: process.env.BENCH_CPU_PROF ? path.join(tmp, 'profiles') : null, profiles };
    return { env, cleanup, pool, keys };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** One draft as the worker loads it, numbered `code`, written to `file`: the document the raw
 * pdfkit and nodemailer children measure. */
export async function writeSampleDocument(env: Env, pool: pg.Pool, file: string, opts: { tag: string; code: string; items?: (seed: number) => object[] }): Promise<void> {
  const [sample] = await env.api.createDrafts(`${opts.tag}${randomSuffix()}`, 1, 1, opts.items);
  const loaded = await loadInvoiceForMail(pool, sample.id, { paymentPageBase: PAYMENT_PAGE_BASE, chains: BUILT_IN_CHAINS });
  const doc: InvoiceDocument = { ...loaded!.doc, code: opts.code, issuedAt: new Date().toISOString() };
  writeFileSync(file, JSON.stringify(doc));
}
