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
//
// The passes live in bench/send/: raw-limits.ts (and raw-child.ts, its child processes), stall.ts,
// ratio.ts (max, half-rate and fixed-rate passes), threads.ts, backends.ts (the comparison), each
// with its part of the report; pass.ts runs one timed pass, setup.ts holds what they share and
// report.ts prints it all.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { backendsOf, codeVersion, loadAvg, note } from './support.js';
import { startSmtpSink } from '../test/helpers/smtp-sink.js';
import type { PassResult } from './send/pass.js';
import { runRatioPasses } from './send/ratio.js';
import { measureRawLimits, measureRawPdf, type RawLimits } from './send/raw-limits.js';
import { formatReport } from './send/report.js';
import { defaultPdfThreads, openBackend, type BackendRun, type ProfiledPass } from './send/setup.js';
import { runStallPasses, type StallRun } from './send/stall.js';
import { runThreadPasses } from './send/threads.js';

const { values: args, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: {
    backend: { type: 'string', default: 'both' },
    // The raw limits and the PDF stall pass, no pipeline passes.
    'stall-only': { type: 'boolean', default: false },
  },
});
const backends = backendsOf(args.backend);
const stallOnly = args['stall-only'];
const n = Number(positionals[0] ?? process.env.BENCH_N ?? 2000);
if (!Number.isInteger(n) || n < 10) throw new Error(`N must be an integer >= 10, got ${positionals[0] ?? process.env.BENCH_N}`);
const concurrencies = (process.env.BENCH_WORKER_CONCURRENCY ?? '8').split(',').map((s) => Number(s.trim()));
const sendConcurrency = Number(process.env.BENCH_SEND_CONCURRENCY ?? 16);
const halfFor = (process.env.BENCH_HALF ?? '1,2')
  .split(',')
  .filter((s) => s.trim())
  .map(Number);
// BENCH_RATES="1=24.5,2=31": only fixed-rate passes (workers=rate), no max passes.
const fixedRates = (process.env.BENCH_RATES ?? '')
  .split(',')
  .filter((x) => x.includes('='))
  .map((x) => x.split('=').map(Number) as [number, number]);
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
  const profiles: ProfiledPass[] = [];
  let raw: RawLimits | null = null;
  let stallRun: StallRun | null = null;
  for (const backend of backends) {
    const run = await openBackend(backend, sink, tmp, profiles);
    open.push(run);
    const { env, pool } = run;

    if (raw === null) {
      // The raw limits and the stall pass run once, on the first backend.
      raw = await measureRawLimits(env, pool, tmp, { seconds: rawPdfSeconds, mailCount: rawMailCount, threadCounts });
      if (stall) stallRun = await runStallPasses(env, pool, tmp, { threads: stallThreads, invoices: stallInvoices, intervalMs: probeIntervalMs, concurrency: concurrencies[0] });
    }

    if (stallOnly) {
      await open.pop()!.cleanup();
      break;
    }
    results.push(...(await runRatioPasses(env, { n, concurrencies, sendConcurrency, halfFor, fixedRates })));
    results.push(...(await runThreadPasses(env, { n, concurrency: concurrencies[0], sendConcurrency, threadCounts, defaultThreads, fixedRates: fixedRates.length > 0 })));
    await open.pop()!.cleanup();
  }

  note(`raw pdfkit again, 1 process; ${loadAvg()}`);
  const pdf1After = await measureRawPdf(raw!.docFile, 1, rawPdfSeconds);

  const report = formatReport({ n, backends, concurrencies, threadCounts, cores, defaultThreads, startLoad, codeAtStart, raw: raw!, pdf1After, results, stall: stallRun, profiles, profileDir: path.join(tmp, 'profiles') });
  process.stdout.write(report.text);
  // A figure measured over failures is INVALID: the run fails.
  if (report.invalid) process.exitCode = 1;
} finally {
  await cleanup();
}
