// `npm run bench:send [N] [--backend postgres|redis|both] [--stall-only]` (or BENCH_N; backend
// default both; --stall-only: the raw limits and the PDF stall pass below, no pipeline passes):
// sends N invoices through the real path
//   HTTP POST /v1/invoices/{id}/send (API process) -> outbox + BullMQ -> worker process(es)
//   -> PDF (pdfkit) -> SMTP (nodemailer pool) -> loopback SMTP sink in this process
// with 1 and with 2 worker processes, and prints sends/s, p50/p99 latency from the HTTP send to
// the SMTP server accepting the message, PDF render ms, worker CPU ms per invoice and peak RSS per
// worker. In the same run it measures the raw limits on this machine (pdfkit alone on one core,
// the project's nodemailer transport alone to the same sink) and prints the pipeline's ratio to
// the lower of the two. A second pass per worker count sends at half the measured maximum rate
// and reports p50/p99 there.
//
// With both backends, the pipeline passes run once on each queue backend (BullMQ on Redis, BullMQ
// on the run database's `bullmq` schema), against the same raw limits, and the report puts them
// side by side (target: Postgres >= 0.8x Redis in sends/s with one worker).
//
// One worker process with 1, 2 and all (os.availableParallelism()) PDF render threads
// (PDF_RENDER_THREADS; the thread count the default max pass already ran at is not run twice),
// each beside raw pdfkit run as that many processes at once (renders/s summed) and the ratio to
// the raw limit on as many cores (lower of that and nodemailer).
//
// PDF stall (default on, on the first backend): 8 invoices at the line-item cap (MAX_LINE_ITEMS
// lines, each description MAX_LINE_DESCRIPTION chars) sent at once to one worker process while
// this process GETs its /healthz (on a WORKER_PORT of its own) every 5 ms, open loop; once with the
// render pool (PDF_RENDER_THREADS as the worker defaults, at least 1) and once with rendering on
// the main thread (PDF_RENDER_THREADS=0). Prints healthz p50/p99/max of each, the same probe on the
// idle worker just before (the floor), raw pdfkit ms for one cap invoice, and the target (pool
// p99 < 50 ms).
//
// Self-contained: own database per backend (invoices_bench_<random>, dropped at the end), own
// Redis prefix (keys deleted at the end), own SMTP sink. Run by hand, never as a test.
//
// Knobs (env): BENCH_N (default 2000), BENCH_WORKER_CONCURRENCY (comma list, default "8"),
// BENCH_SEND_CONCURRENCY (HTTP sends in flight in the max pass, default 16), BENCH_HALF
// ("1,2": worker counts that get a half-rate pass; "" for none), BENCH_RAW_MAIL (messages of the
// raw nodemailer run, default 2000), BENCH_RATES ("1=24.5,2=31": only fixed-rate passes, worker
// count=rate/s), BENCH_RAW_PDF_SECONDS (default 6), BENCH_CPU_PROF=1 (V8 CPU
// profiles of the workers in the max passes, summarised per package; adds overhead),
// BENCH_THREADS (render threads of the one-worker passes, default "1,2,all"; "" for none),
// BENCH_PDF_STALL=0 (skip the stall pass), BENCH_STALL_INVOICES (default 8), BENCH_STALL_THREADS
// (render threads of the stall passes, default "<the worker's default>,0"; the target compares
// the first pool count with 0),
// BENCH_HEALTHZ_INTERVAL_MS (probe interval, default 5).
//
// Small run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379
//   BENCH_HALF= BENCH_RAW_PDF_SECONDS=3 BENCH_RAW_MAIL=500 npm run bench:send -- 200 --backend postgres
// (the admin database URL is BENCH_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres).
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Job } from 'bullmq';
import pg from 'pg';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { createMailTransport, type OutgoingMail } from '../src/mail/transport.js';
import { renderEmail } from '../src/mail/render-email.js';
import type { InvoiceDocument } from '../src/domain/invoice-document.js';
import { renderInvoicePdf } from '../src/pdf/invoice-pdf.js';
import { MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS } from '../src/domain/invoice-limits.js';
import { loadConfig } from '../src/config.js';
import { queueBackendOf, type AppQueue, type QueueBackend } from '../src/queue/backend.js';
import { QUEUES } from '../src/queue/catalogue.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import {
  backendEnv,
  backendsFromArgs,
  busyPercent,
  codeVersion,
  cpuDelta,
  cpuMsOf,
  cpuSnapshot,
  createBenchDatabase,
  DEFAULT_PG,
  fmt,
  loadAvg,
  machineCpu,
  memoryOf,
  note,
  percentile,
  randomSuffix,
  REDIS_URL,
  runTsJson,
  summarizeProfiles,
  sleep,
  spawnTs,
  table,
  waitForHttp,
  type BenchBackend,
  type BenchDatabase,
  type Child,
} from './support.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';
import { startSmtpSink, type SmtpSink } from '../test/helpers/smtp-sink.js';
import { freePort } from '../src/lib/free-port.js';

const SELF = 'bench/send.ts';
const PAYMENT_PAGE_BASE = 'https://pay.example.com/pay';

// =============================================================================================
// Child modes: the raw limits, each in a process of its own (one core, like a worker).

interface RawPdfResult {
  renders: number;
  seconds: number;
  perSecond: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerRender: number;
  pdfBytes: number;
}

async function rawPdf(docFile: string, seconds: number, warm = 30, minRenders = 50): Promise<RawPdfResult> {
  const doc = JSON.parse(readFileSync(docFile, 'utf8')) as InvoiceDocument;
  let bytes = 0;
  for (let i = 0; i < warm; i++) bytes = (await renderInvoicePdf(doc)).length; // warm-up (font parse, JIT)
  const times: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000 || times.length < minRenders) {
    const t = performance.now();
    await renderInvoicePdf(doc);
    times.push(performance.now() - t);
  }
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return {
    renders: times.length,
    seconds: elapsed,
    perSecond: times.length / elapsed,
    meanMs: times.reduce((a, b) => a + b, 0) / times.length,
    p50Ms: percentile(times, 50),
    p99Ms: percentile(times, 99),
    cpuMsPerRender: (cpu.user + cpu.system) / 1000 / times.length,
    pdfBytes: bytes,
  };
}

interface RawMailResult {
  messages: number;
  seconds: number;
  perSecond: number;
  attachmentBytes: number;
  cpuMsPerMessage: number;
}

async function rawMail(docFile: string, smtpUrl: string, count: number): Promise<RawMailResult> {
  const doc = JSON.parse(readFileSync(docFile, 'utf8')) as InvoiceDocument;
  // The project's own transport (nodemailer pool, 5 connections), the same email and PDF the
  // pipeline sends.
  const transport = createMailTransport({ smtpUrl, poolSize: 5, outboxDir: os.tmpdir() });
  const pdf = await renderInvoicePdf(doc);
  const email = renderEmail('invoice', doc);
  const run = randomSuffix();
  const message = (i: number): OutgoingMail => ({
    from: 'Invoices <invoices@example.com>',
    to: `"${doc.customer.name}" <raw-${run}-${i}@bench.example>`,
    replyTo: doc.merchant.email ?? undefined,
    subject: email.subject,
    html: email.html,
    text: email.text,
    messageId: `<raw-${run}-${i}@example.com>`,
    attachments: [{ filename: `invoice-${doc.code}.pdf`, content: pdf, contentType: 'application/pdf' }],
  });
  const sendAll = async (from: number, n: number) => {
    let next = from;
    const end = from + n;
    // nodemailer's pool queues internally; 50 callers in flight keep all 5 connections busy.
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < end) await transport.send(message(next++));
      }),
    );
  };
  await sendAll(0, 100); // warm-up: connections open, JIT
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sendAll(100, count);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await transport.close();
  return { messages: count, seconds, perSecond: count / seconds, attachmentBytes: pdf.length, cpuMsPerMessage: (cpu.user + cpu.system) / 1000 / count };
}

// =============================================================================================
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

function lineItems(seed: number) {
  return Array.from({ length: 20 }, (_, i) => ({
    description: `${SERVICES[(seed + i) % SERVICES.length]} — sprint ${(i % 6) + 1}, ticket #${4100 + i}`,
    quantity: ((seed + i) % 12) + 1,
    unit_amount: `${75 + ((seed * 7 + i * 13) % 300)}.${String((i * 37) % 100).padStart(2, '0')}`,
  }));
}

/** An invoice at the line-item cap: MAX_LINE_ITEMS lines, each description MAX_LINE_DESCRIPTION
 * characters of ordinary words (so pdfkit wraps it as it would a real one). */
function capLineItems(seed: number) {
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

interface Draft {
  id: string;
  email: string;
}

class Api {
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

interface SendRecord {
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
async function sendFlat(api: Api, drafts: Draft[], concurrency: number, out: Map<string, SendRecord>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < drafts.length) await sendOne(api, drafts[next++], out);
    }),
  );
}

/** Open loop at a fixed rate (requests launched on schedule, not after the previous answer). */
async function sendAtRate(api: Api, drafts: Draft[], perSecond: number, out: Map<string, SendRecord>): Promise<number> {
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

interface PassResult {
  label: string;
  workers: number;
  /** PDF render threads per worker process (PDF_RENDER_THREADS); `threadsSet`: set by the pass, not the default. */
  pdfThreads: number;
  threadsSet: boolean;
  concurrency: number;
  mode: 'max' | 'rate';
  targetRate: number | null;
  n: number;
  load: string;
  perSecond: number;
  steadyPerSecond: number;
  httpRate: number;
  httpP50: number;
  httpP99: number;
  httpErrors: number;
  latP50: number;
  latP99: number;
  latMax: number;
  jobRunP50: number;
  jobRunP99: number;
  jobWaitP50: number;
  workerCpuMsPerMsg: number;
  apiCpuMsPerMsg: number;
  benchCpuMsPerMsg: number;
  postgresCpuMsPerMsg: number;
  redisCpuMsPerMsg: number;
  machineBusy: number;
  peakRssMiB: number[];
  maxRateLagMs: number | null;
  /** When (s after the first send) the sends slower than p99 were made, and p99 without the first 5 s. */
  slowAt: string;
  latP99After5s: number;
}

interface Env {
  backend: BenchBackend;
  db: BenchDatabase;
  prefix: string;
  sink: SmtpSink;
  api: Api;
  apiChild: Child;
  queue: AppQueue;
  /** BENCH_CPU_PROF: directory for the workers' V8 CPU profiles of the max passes. */
  profileDir: string | null;
}

/** `extra`: environment on top (PDF_RENDER_THREADS, WORKER_PORT) for every worker of the pass. */
function startWorkers(env: Env, count: number, concurrency: number, profileTag: string | null, extra: Record<string, string> = {}): Child[] {
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

async function waitForWorkers(queue: AppQueue, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while ((await queue.getWorkersCount()) < count) {
    if (Date.now() > deadline) throw new Error(`only ${await queue.getWorkersCount()} of ${count} workers registered after 60 s`);
    await sleep(100);
  }
}

async function jobStats(queue: AppQueue, invoiceIds: Set<string>): Promise<{ runP50: number; runP99: number; waitP50: number; failed: number }> {
  const jobs = (await queue.getJobs(['completed', 'failed'], 0, -1)) as Job<{ invoiceId: string }>[];
  const mine = jobs.filter((j) => j && invoiceIds.has(j.data.invoiceId));
  const runs = mine.filter((j) => j.finishedOn && j.processedOn).map((j) => j.finishedOn! - j.processedOn!);
  const waits = mine.filter((j) => j.processedOn).map((j) => j.processedOn! - j.timestamp);
  return { runP50: percentile(runs, 50), runP99: percentile(runs, 99), waitP50: percentile(waits, 50), failed: mine.filter((j) => j.failedReason).length };
}

async function runPass(
  env: Env,
  opts: { label: string; workers: number; concurrency: number; n: number; rate: number | null; sendConcurrency: number; pdfThreads?: number },
): Promise<PassResult> {
  opts = { ...opts, label: `${env.backend} ${opts.label}` };
  const tag = `${opts.label.replace(/\W+/g, '')}${randomSuffix()}`;
  const warmCount = 10 * opts.workers;
  note(`${opts.label}: creating ${opts.n + warmCount} drafts (20 lines each)`);
  const all = await env.api.createDrafts(tag, opts.n + warmCount);
  const warm = all.slice(0, warmCount);
  const drafts = all.slice(warmCount);

  note(`${opts.label}: starting ${opts.workers} worker process(es), concurrency ${opts.concurrency}`);
  const profileTag = opts.rate === null && env.profileDir ? tag : null;
  const workers = startWorkers(env, opts.workers, opts.concurrency, profileTag, opts.pdfThreads === undefined ? {} : { PDF_RENDER_THREADS: String(opts.pdfThreads) });
  try {
    await waitForWorkers(env.queue, opts.workers);
    // Warm-up (JIT, font parse, SMTP pool connections), not timed.
    const warmSent = new Map<string, SendRecord>();
    await sendFlat(env.api, warm, 4, warmSent);
    await env.sink.waitForAll(
      warm.map((d) => d.email),
      120_000,
    );
    await sleep(1_000);

    const load = loadAvg();
    note(`${opts.label}: timed phase, ${opts.n} sends ${opts.rate ? `at ${fmt(opts.rate)}/s` : `as fast as possible (${opts.sendConcurrency} in flight)`}; ${load}`);
    const pids = workers.map((w) => w.pid);
    const pgBackends = new RegExp(`^postgres: .* ${env.db.name} `);
    const cpu0 = {
      workers: pids.map(cpuMsOf),
      api: cpuMsOf(env.apiChild.pid),
      bench: process.cpuUsage(),
      postgres: cpuSnapshot(pgBackends),
      redis: cpuSnapshot(/^redis-server/),
      machine: machineCpu(),
    };
    const sent = new Map<string, SendRecord>();
    const t0 = performance.now();
    let maxRateLagMs: number | null = null;
    if (opts.rate) maxRateLagMs = await sendAtRate(env.api, drafts, opts.rate, sent);
    else await sendFlat(env.api, drafts, opts.sendConcurrency, sent);
    const tHttpDone = performance.now();
    const emails = drafts.map((d) => d.email);
    await env.sink.waitForAll(emails, 60_000 + opts.n * 100);
    const cpu1 = {
      workers: pids.map(cpuMsOf),
      api: cpuMsOf(env.apiChild.pid),
      bench: process.cpuUsage(cpu0.bench),
      postgres: cpuSnapshot(pgBackends),
      redis: cpuSnapshot(/^redis-server/),
      machine: machineCpu(),
    };
    const arrivals = emails.map((e) => env.sink.arrivals.get(e)!).sort((a, b) => a - b);
    const tLast = arrivals[arrivals.length - 1];
    const latencies = emails.map((e) => env.sink.arrivals.get(e)! - sent.get(e)!.start);
    const http = [...sent.values()];
    const i10 = Math.floor(arrivals.length * 0.1);
    const i90 = Math.floor(arrivals.length * 0.9);
    const stats = await jobStats(env.queue, new Set(drafts.map((d) => d.id)));
    if (stats.failed > 0) note(`${opts.label}: ${stats.failed} job(s) have a failed attempt`);
    const peakRssMiB = pids.map((pid) => memoryOf(pid).peakMiB);
    const n = opts.n;
    return {
      label: opts.label,
      workers: opts.workers,
      pdfThreads: opts.pdfThreads ?? defaultPdfThreads(),
      threadsSet: opts.pdfThreads !== undefined,
      concurrency: opts.concurrency,
      mode: opts.rate ? 'rate' : 'max',
      targetRate: opts.rate,
      n,
      load,
      perSecond: n / ((tLast - t0) / 1000),
      steadyPerSecond: (i90 - i10) / ((arrivals[i90] - arrivals[i10]) / 1000),
      httpRate: n / ((tHttpDone - t0) / 1000),
      httpP50: percentile(
        http.map((h) => h.httpMs),
        50,
      ),
      httpP99: percentile(
        http.map((h) => h.httpMs),
        99,
      ),
      httpErrors: http.filter((h) => h.status !== 200).length,
      latP50: percentile(latencies, 50),
      latP99: percentile(latencies, 99),
      latMax: Math.max(...latencies),
      jobRunP50: stats.runP50,
      jobRunP99: stats.runP99,
      jobWaitP50: stats.waitP50,
      workerCpuMsPerMsg: cpu1.workers.reduce((a, b, i) => a + b - cpu0.workers[i], 0) / n,
      apiCpuMsPerMsg: (cpu1.api - cpu0.api) / n,
      benchCpuMsPerMsg: (cpu1.bench.user + cpu1.bench.system) / 1000 / n,
      postgresCpuMsPerMsg: cpuDelta(cpu0.postgres, cpu1.postgres) / n,
      redisCpuMsPerMsg: cpuDelta(cpu0.redis, cpu1.redis) / n,
      machineBusy: busyPercent(cpu0.machine, cpu1.machine),
      peakRssMiB,
      maxRateLagMs,
      slowAt: (() => {
        const p99 = percentile(latencies, 99);
        const at = emails
          .filter((e) => env.sink.arrivals.get(e)! - sent.get(e)!.start > p99)
          .map((e) => (sent.get(e)!.start - t0) / 1000)
          .sort((a, b) => a - b);
        return at.length ? `${fmt(at[0])}..${fmt(at[at.length - 1])} s (median ${fmt(percentile(at, 50))} s)` : '-';
      })(),
      latP99After5s: percentile(
        emails.filter((e) => sent.get(e)!.start - t0 >= 5_000).map((e) => env.sink.arrivals.get(e)! - sent.get(e)!.start),
        99,
      ),
    };
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    if (profileTag) profiles.push({ label: opts.label, tag: profileTag, invoices: opts.n + warmCount });
  }
}

/** The render threads a worker starts with when the bench does not set them (PDF_RENDER_THREADS
 * from this process's environment, else the config default). */
function defaultPdfThreads(): number {
  try {
    return loadConfig({ ...process.env, DATABASE_URL: process.env.DATABASE_URL ?? DEFAULT_PG }).pdfRenderThreads;
  } catch {
    return Math.min(4, os.availableParallelism());
  }
}

// ---------------------------------------------------------------------------------------------
// PDF stall pass: /healthz of one worker probed while invoices at the line-item cap render in it.

interface HealthzProbe {
  /** Resolves with the latency of every probe launched until then (in flight ones awaited). */
  stop(): Promise<number[]>;
}

/** Open loop: a GET /healthz every `intervalMs`, on schedule whether or not the previous one has
 * answered, so a blocked event loop delays every probe that arrives during the block. */
function probeHealthz(port: number, intervalMs: number): HealthzProbe {
  const agent = new http.Agent({ keepAlive: true });
  const latencies: number[] = [];
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  const once = () =>
    new Promise<void>((resolve) => {
      const t = performance.now();
      const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => {
        res.resume();
        res.once('end', () => {
          if (res.statusCode === 200) latencies.push(performance.now() - t);
          else latencies.push(NaN);
          resolve();
        });
      });
      req.once('error', () => {
        latencies.push(NaN);
        resolve();
      });
    });
  const loop = (async () => {
    const t0 = performance.now();
    for (let i = 0; !stopped; i++) {
      const wait = t0 + i * intervalMs - performance.now();
      if (wait > 0) await sleep(wait);
      const p = once().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(inFlight);
      agent.destroy();
      return latencies;
    },
  };
}

interface StallResult {
  label: string;
  pdfThreads: number;
  invoices: number;
  idle: number[];
  during: number[];
  failedProbes: number;
  wallMs: number;
  jobRunP50: number;
  jobRunP99: number;
  load: string;
}

async function runStallPass(env: Env, opts: { pdfThreads: number; invoices: number; intervalMs: number; concurrency: number }): Promise<StallResult> {
  const label = `${env.backend} stall, ${opts.pdfThreads === 0 ? 'main thread (PDF_RENDER_THREADS=0)' : `pool of ${opts.pdfThreads} (PDF_RENDER_THREADS=${opts.pdfThreads})`}`;
  const tag = `stall${opts.pdfThreads}t${randomSuffix()}`;
  const warmCount = Math.max(2, opts.pdfThreads);
  note(`${label}: creating ${opts.invoices + warmCount} drafts at the cap (${MAX_LINE_ITEMS} lines of ${MAX_LINE_DESCRIPTION} chars)`);
  const all = await env.api.createDrafts(tag, opts.invoices + warmCount, 4, capLineItems);
  const warm = all.slice(0, warmCount);
  const drafts = all.slice(warmCount);
  const port = await freePort();
  const [worker] = startWorkers(env, 1, opts.concurrency, null, { PDF_RENDER_THREADS: String(opts.pdfThreads), WORKER_PORT: String(port) });
  try {
    await waitForWorkers(env.queue, 1);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`);
    // Warm-up: JIT and fonts of the main thread or of each render thread, not timed.
    await sendFlat(env.api, warm, warmCount, new Map());
    await env.sink.waitForAll(
      warm.map((d) => d.email),
      120_000,
    );
    await sleep(500);
    // The same probe against the same idle worker first: the floor the figure is compared with.
    const idleProbe = probeHealthz(port, opts.intervalMs);
    await sleep(1_000);
    const idle = await idleProbe.stop();
    const load = loadAvg();
    note(`${label}: ${opts.invoices} cap invoices at once, /healthz every ${opts.intervalMs} ms; ${load}`);
    const probe = probeHealthz(port, opts.intervalMs);
    const t0 = performance.now();
    await sendFlat(env.api, drafts, opts.invoices, new Map());
    await env.sink.waitForAll(
      drafts.map((d) => d.email),
      120_000 + opts.invoices * 10_000,
    );
    const wallMs = performance.now() - t0;
    const during = await probe.stop();
    const stats = await jobStats(env.queue, new Set(drafts.map((d) => d.id)));
    const ok = (xs: number[]) => xs.filter((x) => Number.isFinite(x));
    return {
      label,
      pdfThreads: opts.pdfThreads,
      invoices: opts.invoices,
      idle: ok(idle),
      during: ok(during),
      failedProbes: idle.length - ok(idle).length + during.length - ok(during).length,
      wallMs,
      jobRunP50: stats.runP50,
      jobRunP99: stats.runP99,
      load,
    };
  } finally {
    await worker.stop();
  }
}

const profiles: { label: string; tag: string; invoices: number }[] = [];

/** `processes` copies of the raw-pdf child at once (one per core), renders/s summed. */
async function measureRawPdf(docFile: string, processes: number, seconds: number, warm = 30, minRenders = 50): Promise<{ load: string; perProcess: RawPdfResult[]; total: number }> {
  const load = loadAvg();
  const perProcess = await Promise.all(
    Array.from({ length: processes }, () => runTsJson<RawPdfResult>(SELF, ['--raw-pdf', docFile, String(seconds), String(warm), String(minRenders)])),
  );
  return { load, perProcess, total: perProcess.reduce((a, r) => a + r.perSecond, 0) };
}

interface BackendRun {
  env: Env;
  cleanup(): Promise<void>;
}

/** One backend's database, queue handle and API process (workers come and go per pass). */
async function openBackend(backend: BenchBackend, sink: SmtpSink, tmp: string): Promise<BackendRun & { pool: pg.Pool; keys: { sandbox: string } }> {
  const db = await createBenchDatabase({ queueSchema: backend === 'postgres' });
  const prefix = `bench_send_${randomSuffix()}`;
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  // The drop at the end terminates whatever is still connected; never crash on an idle client.
  pool.on('error', () => undefined);
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
    const env: Env = { backend, db, prefix, sink, api, apiChild, queue, profileDir: process.env.BENCH_CPU_PROF ? path.join(tmp, 'profiles') : null };
    return { env, cleanup, pool, keys };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function main(): Promise<void> {
  const { backends, rest } = backendsFromArgs(process.argv.slice(2));
  // --stall-only: the raw limits and the PDF stall pass, no pipeline passes.
  const stallOnly = rest.includes('--stall-only');
  if (stallOnly) rest.splice(rest.indexOf('--stall-only'), 1);
  const n = Number(rest[0] ?? process.env.BENCH_N ?? 2000);
  if (!Number.isInteger(n) || n < 10) throw new Error(`N must be an integer >= 10, got ${rest[0] ?? process.env.BENCH_N}`);
  const concurrencies = (process.env.BENCH_WORKER_CONCURRENCY ?? '8').split(',').map((s) => Number(s.trim()));
  const sendConcurrency = Number(process.env.BENCH_SEND_CONCURRENCY ?? 16);
  const halfFor = (process.env.BENCH_HALF ?? '1,2')
    .split(',')
    .filter((s) => s.trim())
    .map(Number);
  const rawMailCount = Number(process.env.BENCH_RAW_MAIL ?? 2000);
  const rawPdfSeconds = Number(process.env.BENCH_RAW_PDF_SECONDS ?? 6);
  const stall = process.env.BENCH_PDF_STALL !== '0';
  const stallInvoices = Number(process.env.BENCH_STALL_INVOICES ?? 8);
  const probeIntervalMs = Number(process.env.BENCH_HEALTHZ_INTERVAL_MS ?? 5);
  const cores = os.availableParallelism();
  // Render threads of the one-worker passes: "1,2,all" by default, "all" = os.availableParallelism().
  const threadCounts = [
    ...new Set(
      (process.env.BENCH_THREADS ?? '1,2,all')
        .split(',')
        .filter((x) => x.trim())
        .map((x) => (x.trim() === 'all' ? cores : Number(x))),
    ),
  ];
  if (threadCounts.some((t) => !Number.isInteger(t) || t < 1)) throw new Error(`BENCH_THREADS: counts >= 1 or "all", got ${process.env.BENCH_THREADS}`);
  const defaultThreads = defaultPdfThreads();
  // Render threads of the stall passes: the worker's default pool (at least 1), then the main thread.
  const stallThreads = (process.env.BENCH_STALL_THREADS ?? `${Math.max(1, defaultThreads)},0`).split(',').map((x) => Number(x.trim()));
  if (stallThreads.some((t) => !Number.isInteger(t) || t < 0)) throw new Error(`BENCH_STALL_THREADS: counts >= 0, got ${process.env.BENCH_STALL_THREADS}`);

  const startLoad = loadAvg();
  const codeAtStart = codeVersion();
  note(`bench:send N=${n}, backends ${backends.join(' and ')}, worker concurrency ${concurrencies.join('/')}, ${os.cpus().length} cpus, node ${process.version}; ${startLoad}`);
  const sink = await startSmtpSink({ parse: false });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-send-'));
  const open: BackendRun[] = [];
  const cleanup = async () => {
    for (const run of open.splice(0)) await run.cleanup();
    await sink.close().catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    note('interrupted; cleaning up');
    void cleanup().finally(() => process.exit(130));
  });

  try {
    const results: PassResult[] = [];
    type RawPdf = Awaited<ReturnType<typeof measureRawPdf>>;
    let raw: { pdf1: RawPdf; pdf2: RawPdf; mail: RawMailResult; mailLoad: string; docFile: string } | null = null;
    // Raw pdfkit with k processes at once, k = each render-thread count of the thread passes.
    const rawPdfOn = new Map<number, RawPdf>();
    const stalls: StallResult[] = [];
    let capRaw: RawPdf | null = null;
    for (const backend of backends) {
      const run = await openBackend(backend, sink, tmp);
      open.push(run);
      const { env, pool } = run;

      if (raw === null) {
        // The document every raw measurement uses: one of these drafts as the worker loads it, numbered.
        const [sample] = await env.api.createDrafts(`sample${randomSuffix()}`, 1);
        const loaded = await loadInvoiceForMail(pool, sample.id, PAYMENT_PAGE_BASE);
        const doc: InvoiceDocument = { ...loaded!.doc, code: 'TEST-INV-000123', issuedAt: new Date().toISOString() };
        const docFile = path.join(tmp, 'doc.json');
        writeFileSync(docFile, JSON.stringify(doc));
        // ---- raw limits (before the pipeline)
        note(`raw pdfkit, 1 process, ${rawPdfSeconds} s; ${loadAvg()}`);
        const pdf1 = await measureRawPdf(docFile, 1, rawPdfSeconds);
        note(`raw pdfkit, 2 processes in parallel, ${rawPdfSeconds} s; ${loadAvg()}`);
        const pdf2 = await measureRawPdf(docFile, 2, rawPdfSeconds);
        const mailLoad = loadAvg();
        note(`raw nodemailer (pool 5) -> sink, ${rawMailCount} messages; ${mailLoad}`);
        const mail = await runTsJson<RawMailResult>(SELF, ['--raw-mail', docFile, sink.url, String(rawMailCount)]);
        raw = { pdf1, pdf2, mail, mailLoad, docFile };
        rawPdfOn.set(1, pdf1);
        rawPdfOn.set(2, pdf2);
        for (const k of threadCounts.filter((t) => !rawPdfOn.has(t))) {
          note(`raw pdfkit, ${k} processes in parallel, ${rawPdfSeconds} s; ${loadAvg()}`);
          rawPdfOn.set(k, await measureRawPdf(docFile, k, rawPdfSeconds));
        }

        if (stall) {
          // ---- PDF stall: the worker's /healthz while invoices at the cap render, pool vs main thread
          const [capSample] = await env.api.createDrafts(`capsample${randomSuffix()}`, 1, 1, capLineItems);
          const capLoaded = await loadInvoiceForMail(pool, capSample.id, PAYMENT_PAGE_BASE);
          const capDocFile = path.join(tmp, 'cap-doc.json');
          writeFileSync(capDocFile, JSON.stringify({ ...capLoaded!.doc, code: 'TEST-INV-000124', issuedAt: new Date().toISOString() }));
          note(`raw pdfkit, invoice at the cap, 1 process, 3 s; ${loadAvg()}`);
          capRaw = await measureRawPdf(capDocFile, 1, 3, 3, 10);
          for (const t of stallThreads) {
            stalls.push(await runStallPass(env, { pdfThreads: t, invoices: stallInvoices, intervalMs: probeIntervalMs, concurrency: concurrencies[0] }));
            const r = stalls[stalls.length - 1];
            note(`${r.label}: /healthz p50 ${fmt(percentile(r.during, 50))} ms, p99 ${fmt(percentile(r.during, 99))} ms, max ${fmt(Math.max(...r.during))} ms`);
          }
        }
      }

      // ---- the pipeline, on this backend
      if (stallOnly) {
        await open.pop()!.cleanup();
        break;
      }
      const mine: PassResult[] = [];
      // BENCH_RATES="1=24.5,2=31": only fixed-rate passes (workers=rate), no max passes.
      const fixedRates = (process.env.BENCH_RATES ?? '')
        .split(',')
        .filter((x) => x.includes('='))
        .map((x) => x.split('=').map(Number) as [number, number]);
      for (const [w, rate] of fixedRates) {
        const count = Math.max(50, Math.min(Math.ceil(n / 2), Math.ceil(rate * 30)));
        mine.push(await runPass(env, { label: `rate ${w}w c${concurrencies[0]}`, workers: w, concurrency: concurrencies[0], n: count, rate, sendConcurrency }));
        const r = mine[mine.length - 1];
        note(`${r.label}: ${fmt(r.perSecond)}/s, p50 ${fmt(r.latP50, 0)} ms, p99 ${fmt(r.latP99, 0)} ms`);
      }
      for (const c of fixedRates.length ? [] : concurrencies) {
        for (const w of [1, 2]) {
          mine.push(await runPass(env, { label: `max ${w}w c${c}`, workers: w, concurrency: c, n, rate: null, sendConcurrency }));
          const r = mine[mine.length - 1];
          note(`${r.label}: ${fmt(r.perSecond)}/s, p50 ${fmt(r.latP50, 0)} ms, p99 ${fmt(r.latP99, 0)} ms`);
        }
      }
      const c0 = concurrencies[0];
      for (const w of fixedRates.length ? [] : halfFor) {
        const max = mine.find((r) => r.mode === 'max' && r.workers === w && r.concurrency === c0);
        if (!max) continue;
        const rate = max.perSecond / 2;
        const count = Math.max(50, Math.min(Math.ceil(n / 2), Math.ceil(rate * 30)));
        mine.push(await runPass(env, { label: `half ${w}w c${c0}`, workers: w, concurrency: c0, n: count, rate, sendConcurrency }));
        const r = mine[mine.length - 1];
        note(`${r.label}: ${fmt(r.perSecond)}/s, p50 ${fmt(r.latP50, 0)} ms, p99 ${fmt(r.latP99, 0)} ms`);
      }
      // One worker process with 1, 2, all render threads (the max pass above already ran at the default).
      const c0max = concurrencies[0];
      for (const t of threadCounts) {
        if (!fixedRates.length && t === defaultThreads) continue;
        mine.push(await runPass(env, { label: `max 1w c${c0max} t${t}`, workers: 1, concurrency: c0max, n, rate: null, sendConcurrency, pdfThreads: t }));
        const r = mine[mine.length - 1];
        note(`${r.label}: ${fmt(r.perSecond)}/s, p50 ${fmt(r.latP50, 0)} ms, p99 ${fmt(r.latP99, 0)} ms`);
      }
      results.push(...mine);
      await open.pop()!.cleanup();
    }
    const { pdf1, pdf2, mail, mailLoad, docFile } = raw!;

    // ---- raw pdfkit again (after), to see drift from other load on the machine
    note(`raw pdfkit again, 1 process; ${loadAvg()}`);
    const pdf1After = await measureRawPdf(docFile, 1, rawPdfSeconds);

    // ---- report
    const pdfLimit = Math.max(pdf1.total, pdf1After.total);
    const rawLimit = Math.min(pdfLimit, mail.perSecond);
    const out: string[] = [];
    out.push('');
    out.push(`bench:send  N=${n}  backends ${backends.join(', ')}  ${os.cpus().length} cpus (${os.cpus()[0]?.model ?? '?'}), node ${process.version}`);
    out.push(`load at start: ${startLoad}; at end: ${loadAvg()}`);
    out.push(`code: ${codeAtStart}${codeVersion() === codeAtStart ? '' : `; at end: ${codeVersion()}`}`);
    out.push(`invoice: 20 line items, PDF ${fmt(pdf1.perProcess[0].pdfBytes / 1024)} KiB (${pdf1.perProcess[0].pdfBytes} bytes)`);
    out.push('');
    out.push('Raw limits on this machine (same run)');
    out.push(
      table(
        ['measurement', 'rate/s', 'ms each (mean)', 'p50 ms', 'p99 ms', 'cpu ms each', 'load'],
        [
          ['pdfkit renderInvoicePdf, 1 process (before)', fmt(pdf1.total), fmt(pdf1.perProcess[0].meanMs, 2), fmt(pdf1.perProcess[0].p50Ms, 2), fmt(pdf1.perProcess[0].p99Ms, 2), fmt(pdf1.perProcess[0].cpuMsPerRender, 2), pdf1.load],
          ['pdfkit renderInvoicePdf, 1 process (after)', fmt(pdf1After.total), fmt(pdf1After.perProcess[0].meanMs, 2), fmt(pdf1After.perProcess[0].p50Ms, 2), fmt(pdf1After.perProcess[0].p99Ms, 2), fmt(pdf1After.perProcess[0].cpuMsPerRender, 2), pdf1After.load],
          ['pdfkit renderInvoicePdf, 2 processes (sum)', fmt(pdf2.total), fmt(pdf2.perProcess[0].meanMs, 2), fmt(pdf2.perProcess[0].p50Ms, 2), fmt(pdf2.perProcess[0].p99Ms, 2), fmt(pdf2.perProcess[0].cpuMsPerRender, 2), pdf2.load],
          [`nodemailer pool(5) -> loopback sink, ${fmt(mail.attachmentBytes / 1024)} KiB PDF`, fmt(mail.perSecond), fmt(1000 / mail.perSecond, 2), '-', '-', fmt(mail.cpuMsPerMessage, 2), mailLoad],
        ],
      ),
    );
    out.push(`lower of the two (1 core pdfkit, best of before/after = ${fmt(pdfLimit)}/s; nodemailer ${fmt(mail.perSecond)}/s): ${fmt(rawLimit)}/s`);
    out.push('');
    out.push('Pipeline: HTTP send -> outbox -> BullMQ -> worker (PDF + SMTP) -> sink accepted');
    out.push(
      table(
        ['pass', 'N', 'sends/s', 'steady/s', 'ratio', 'lat p50 ms', 'lat p99 ms', 'lat max ms', 'http/s', 'http p50/p99 ms', 'job run p50/p99 ms', 'peak RSS MiB', 'load'],
        results.map((r) => [
          r.mode === 'rate' ? `${r.label} @${fmt(r.targetRate!)}/s` : r.label,
          r.n,
          fmt(r.perSecond),
          fmt(r.steadyPerSecond),
          r.mode === 'max' ? fmt(r.perSecond / rawLimit, 2) : '-',
          fmt(r.latP50, 0),
          fmt(r.latP99, 0),
          fmt(r.latMax, 0),
          fmt(r.httpRate),
          `${fmt(r.httpP50, 1)}/${fmt(r.httpP99, 1)}`,
          `${fmt(r.jobRunP50, 0)}/${fmt(r.jobRunP99, 0)}`,
          r.peakRssMiB.map((m) => fmt(m, 0)).join('+'),
          r.load.replace('load ', ''),
        ]),
      ),
    );
    out.push('');
    out.push('Where the CPU went, ms per invoice (postgres: the backends of the run database; redis: the whole shared server)');
    out.push(
      table(
        ['pass', 'worker(s)', 'api', 'bench (sender+sink)', 'postgres', 'redis', 'machine busy %', 'error/non-200 sends'],
        results.map((r) => [
          r.label,
          fmt(r.workerCpuMsPerMsg, 2),
          fmt(r.apiCpuMsPerMsg, 2),
          fmt(r.benchCpuMsPerMsg, 2),
          fmt(r.postgresCpuMsPerMsg, 2),
          fmt(r.redisCpuMsPerMsg, 2),
          fmt(r.machineBusy, 0),
          r.httpErrors,
        ]),
      ),
    );
    out.push(
      `PDF render ms per invoice: ${fmt(pdf1.perProcess[0].meanMs, 2)} ms mean (${fmt(pdf1.perProcess[0].cpuMsPerRender, 2)} CPU ms) on one core alone (raw); the worker spends ${results
        .map((r) => `${fmt(r.workerCpuMsPerMsg, 2)} (${r.label})`)
        .join(', ')} CPU ms per invoice in all (PDF, email, SMTP, queue, database, reminders).`,
    );
    // One worker process, 1/2/all render threads, beside raw pdfkit on as many cores.
    const oneWorker = (backend: BenchBackend, t: number) =>
      results.find((r) => r.label.startsWith(`${backend} `) && r.mode === 'max' && r.workers === 1 && r.concurrency === concurrencies[0] && r.pdfThreads === t);
    // Each (backend, thread count) pass that ran, with raw pdfkit on as many cores and the lower
    // of that and nodemailer: the table and the targets below read the same rows.
    const threadPasses = backends.flatMap((backend) =>
      threadCounts.flatMap((t) => {
        const r = oneWorker(backend, t);
        const rawK = rawPdfOn.get(t);
        return r && rawK ? [{ backend, t, r, rawK, limitK: Math.min(rawK.total, mail.perSecond) }] : [];
      }),
    );
    const threadRows = threadPasses.map(({ t, r, rawK, limitK }) => [
      r.label,
      t,
      fmt(r.perSecond),
      fmt(rawK.total),
      fmt(r.perSecond / rawK.total, 2),
      fmt(limitK),
      fmt(r.perSecond / limitK, 2),
      fmt(r.perSecond / rawLimit, 2),
      fmt(r.workerCpuMsPerMsg, 2),
      fmt(r.peakRssMiB[0], 0),
      fmt(r.machineBusy, 0),
    ]);
    if (threadRows.length) {
      out.push('');
      out.push(`One worker process (concurrency ${concurrencies[0]}), PDF_RENDER_THREADS = ${threadCounts.join(', ')} (${cores} = all cores; default ${defaultThreads}), beside raw pdfkit run as that many processes at once (sum)`);
      out.push(
        table(
          ['pass', 'threads', 'sends/s', 'raw pdfkit k procs/s', 'x pdfkit k', 'raw limit k/s (lower of pdfkit k, nodemailer)', 'x raw limit k', 'x 1-core raw limit', 'worker cpu ms each', 'peak RSS MiB', 'machine busy %'],
          threadRows,
        ),
      );
    }
    if (stalls.length) {
      const capPdf = capRaw!.perProcess[0];
      out.push('');
      out.push(
        `PDF stall: GET /healthz on the worker's WORKER_PORT every ${probeIntervalMs} ms (open loop) while ${stallInvoices} invoices at the cap (${MAX_LINE_ITEMS} lines x ${MAX_LINE_DESCRIPTION} chars, PDF ${fmt(capPdf.pdfBytes / 1024)} KiB) render in one worker process (concurrency ${concurrencies[0]}); idle = the same probe on the same worker just before`,
      );
      out.push(
        `raw pdfkit, one invoice at the cap, 1 process: ${fmt(capPdf.meanMs, 0)} ms mean, p99 ${fmt(capPdf.p99Ms, 0)} ms (${fmt(capPdf.cpuMsPerRender, 0)} CPU ms): the block one render puts on an event loop; ${capRaw!.load}`,
      );
      out.push(
        table(
          ['render in', 'idle p50/p99/max ms', 'healthz p50 ms', 'p99 ms', 'max ms', 'probes', 'failed', 'render wall s', 'job run p50/p99 ms', 'load'],
          stalls.map((r) => [
            r.label,
            `${fmt(percentile(r.idle, 50))}/${fmt(percentile(r.idle, 99))}/${fmt(Math.max(...r.idle))}`,
            fmt(percentile(r.during, 50)),
            fmt(percentile(r.during, 99)),
            fmt(Math.max(...r.during)),
            r.during.length,
            r.failedProbes,
            fmt(r.wallMs / 1000, 2),
            `${fmt(r.jobRunP50, 0)}/${fmt(r.jobRunP99, 0)}`,
            r.load.replace('load ', ''),
          ]),
        ),
      );
    }
    out.push('');
    out.push('Targets');
    const poolStall = stalls.find((r) => r.pdfThreads > 0);
    const mainStall = stalls.find((r) => r.pdfThreads === 0);
    if (poolStall && mainStall) {
      const p99 = percentile(poolStall.during, 99);
      out.push(
        `  /healthz during ${stallInvoices} cap renders, pool of ${poolStall.pdfThreads}: p99 ${fmt(p99)} ms vs < 50 ms: ${p99 < 50 ? 'met' : 'MISSED'} (main thread: p99 ${fmt(percentile(mainStall.during, 99))} ms, max ${fmt(Math.max(...mainStall.during))} ms; idle p99 ${fmt(percentile(poolStall.idle, 99))} ms)`,
      );
    }
    for (const { backend, t, r, rawK, limitK } of threadPasses) {
      out.push(
        `  ${backend} one worker, ${t} render thread(s): ${fmt(r.perSecond)}/s = ${fmt(r.perSecond / limitK, 2)}x the raw limit on ${t} core(s) (${fmt(limitK)}/s; pdfkit x${t} ${fmt(rawK.total)}/s) vs >= 0.7: ${r.perSecond / limitK >= 0.7 ? 'met' : 'MISSED'}`,
      );
    }
    const maxOf = (backend: BenchBackend, workers: number, c: number) =>
      results.find((r) => r.label.startsWith(`${backend} `) && r.mode === 'max' && !r.threadsSet && r.workers === workers && r.concurrency === c);
    for (const backend of backends) {
      for (const c of concurrencies) {
        const one = maxOf(backend, 1, c);
        const two = maxOf(backend, 2, c);
        if (!one || !two) continue;
        const ratio = one.perSecond / rawLimit;
        out.push(`  ${backend} c${c}: ratio (1 worker) ${fmt(ratio, 2)} vs >= 0.7: ${ratio >= 0.7 ? 'met' : 'MISSED'}`);
        out.push(
          `  ${backend} c${c}: second worker process: ${fmt(two.perSecond)}/s vs ${fmt(one.perSecond)}/s = x${fmt(two.perSecond / one.perSecond, 2)} (${two.perSecond > one.perSecond * 1.05 ? 'adds throughput' : 'does NOT add throughput'}; 2-process pdfkit alone: x${fmt(pdf2.total / pdf1.total, 2)})`,
        );
      }
    }
    for (const c of concurrencies) {
      const pgOne = maxOf('postgres', 1, c);
      const redisOne = maxOf('redis', 1, c);
      if (!pgOne || !redisOne) continue;
      const x = pgOne.perSecond / redisOne.perSecond;
      out.push(
        `  c${c}: Postgres backend ${fmt(pgOne.perSecond)}/s vs Redis backend ${fmt(redisOne.perSecond)}/s with one worker = ${fmt(x, 2)}x vs >= 0.8x: ${x >= 0.8 ? 'met' : 'MISSED'} (worker CPU ms per invoice ${fmt(pgOne.workerCpuMsPerMsg, 2)} vs ${fmt(redisOne.workerCpuMsPerMsg, 2)}; Postgres ms per invoice ${fmt(pgOne.postgresCpuMsPerMsg, 2)} vs ${fmt(redisOne.postgresCpuMsPerMsg, 2)})`,
      );
    }
    for (const r of results.filter((x) => x.mode === 'rate')) {
      out.push(
        `  ${r.label}: p99 ${fmt(r.latP99, 0)} ms at ${fmt(r.targetRate!)}/s (achieved ${fmt(r.perSecond)}/s, max schedule lag ${fmt(r.maxRateLagMs ?? NaN, 0)} ms) vs < 1000 ms: ${r.latP99 < 1000 ? 'met' : 'MISSED'}; p99 without the first 5 s: ${fmt(r.latP99After5s, 0)} ms; sends slower than p99 were made at t=${r.slowAt}`,
      );
    }
    for (const p of profiles) {
      const dir = path.join(tmp, 'profiles');
      // One directory per worker process; one profile per thread (main, and tsx's loader thread).
      const files = readdirSync(dir)
        .filter((d) => d.startsWith(`${p.tag}-`))
        .flatMap((d) => readdirSync(path.join(dir, d)).map((f) => path.join(dir, d, f)));
      if (files.length === 0) continue;
      const s = summarizeProfiles(files, p.invoices, ['renderInvoicePdf', 'renderEmail', 'formatDocumentDate', 'loadInvoiceForMail', 'deliverOnce', 'afterSend']);
      out.push('');
      out.push(
        `CPU profile of the worker(s), ${p.label}: ${fmt(s.totalMs, 0)} ms sampled (non-idle, whole process life incl. start-up) over ${p.invoices} invoices = ${fmt(s.totalMs / p.invoices, 2)} ms/invoice; inclusive (sync parts) ms/invoice: ${Object.entries(s.inclusive)
          .map(([f, ms]) => `${f} ${fmt(ms / p.invoices, 2)}`)
          .join(', ')} (sampled time is wall time between samples: inflated when the machine is oversubscribed)`,
      );
      out.push(table(['self time by package/module', 'ms', '%', 'ms/invoice'], s.rows));
    }
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    await cleanup();
  }
}

// =============================================================================================

const mode = process.argv[2];
if (mode === '--raw-pdf') {
  const r = await rawPdf(process.argv[3], Number(process.argv[4] ?? 6), Number(process.argv[5] ?? 30), Number(process.argv[6] ?? 50));
  process.stdout.write(`${JSON.stringify(r)}\n`);
} else if (mode === '--raw-mail') {
  const r = await rawMail(process.argv[3], process.argv[4], Number(process.argv[5] ?? 2000));
  process.stdout.write(`${JSON.stringify(r)}\n`);
} else {
  await main();
}
