// The PDF stall pass: /healthz of one worker probed while invoices at the line-item cap render in
// it, with the render pool and with rendering on the main thread.
import http from 'node:http';
import path from 'node:path';
import pg from 'pg';
import { MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS } from '../../src/domain/invoice-limits.js';
import { freePort } from '../../src/lib/free-port.js';
import { fmt, loadAvg, note, percentile, randomSuffix, sleep, table, waitForHttp } from '../support.js';
import { measureRawPdf, type RawPdfRun } from './raw-limits.js';
import { capLineItems, jobStats, sendFlat, startWorkers, waitForWorkers, writeSampleDocument, type Env } from './setup.js';

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

export interface StallResult {
  label: string;
  pdfThreads: number;
  invoices: number;
  idle: number[];
  during: number[];
  failedProbes: number;
  /** Render jobs with a failed attempt. */
  failedJobs: number;
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
      failedJobs: stats.failed,
      wallMs,
      jobRunP50: stats.runP50,
      jobRunP99: stats.runP99,
      load,
    };
  } finally {
    await worker.stop();
  }
}

export interface StallRun {
  /** Raw pdfkit, one invoice at the cap, 1 process. */
  capRaw: RawPdfRun;
  stalls: StallResult[];
  invoices: number;
  intervalMs: number;
}

/** Raw pdfkit on one cap invoice, then one stall pass per render-thread count in `threads`. */
export async function runStallPasses(
  env: Env,
  pool: pg.Pool,
  tmp: string,
  opts: { threads: number[]; invoices: number; intervalMs: number; concurrency: number },
): Promise<StallRun> {
  const capDocFile = path.join(tmp, 'cap-doc.json');
  await writeSampleDocument(env, pool, capDocFile, { tag: 'capsample', code: 'TEST-INV-000124', items: capLineItems });
  note(`raw pdfkit, invoice at the cap, 1 process, 3 s; ${loadAvg()}`);
  const capRaw = await measureRawPdf(capDocFile, 1, 3, 3, 10);
  const stalls: StallResult[] = [];
  for (const t of opts.threads) {
    stalls.push(await runStallPass(env, { pdfThreads: t, invoices: opts.invoices, intervalMs: opts.intervalMs, concurrency: opts.concurrency }));
    const r = stalls[stalls.length - 1];
    note(`${r.label}: /healthz p50 ${fmt(percentile(r.during, 50))} ms, p99 ${fmt(percentile(r.during, 99))} ms, max ${fmt(Math.max(...r.during))} ms`);
  }
  return { capRaw, stalls, invoices: opts.invoices, intervalMs: opts.intervalMs };
}

/** The report's stall section: the cap invoice's raw render and one row per stall pass. */
export function stallSection(run: StallRun, concurrency: number): string[] {
  const { capRaw, stalls } = run;
  const capPdf = capRaw.perProcess[0];
  return [
    '',
    `PDF stall: GET /healthz on the worker's WORKER_PORT every ${run.intervalMs} ms (open loop) while ${run.invoices} invoices at the cap (${MAX_LINE_ITEMS} lines x ${MAX_LINE_DESCRIPTION} chars, PDF ${fmt(capPdf.pdfBytes / 1024)} KiB) render in one worker process (concurrency ${concurrency}); idle = the same probe on the same worker just before`,
    `raw pdfkit, one invoice at the cap, 1 process: ${fmt(capPdf.meanMs, 0)} ms mean, p99 ${fmt(capPdf.p99Ms, 0)} ms (${fmt(capPdf.cpuMsPerRender, 0)} CPU ms): the block one render puts on an event loop; ${capRaw.load}`,
    table(
      ['render in', 'idle p50/p99/max ms', 'healthz p50 ms', 'p99 ms', 'max ms', 'probes', 'failed', 'render wall s', 'job run p50/p99 ms', 'load'],
      stalls.map((r) => [
        `${r.label}${r.failedProbes > 0 || r.failedJobs > 0 ? ' INVALID' : ''}`,
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
  ];
}

/** The stall target (pool p99 < 50 ms), when both a pool and a main-thread pass ran. */
export function stallTargets(run: StallRun): string[] {
  const poolStall = run.stalls.find((r) => r.pdfThreads > 0);
  const mainStall = run.stalls.find((r) => r.pdfThreads === 0);
  if (!poolStall || !mainStall) return [];
  const p99 = percentile(poolStall.during, 99);
  return [
    `  /healthz during ${run.invoices} cap renders, pool of ${poolStall.pdfThreads}: p99 ${fmt(p99)} ms vs < 50 ms: ${p99 < 50 ? 'met' : 'MISSED'} (main thread: p99 ${fmt(percentile(mainStall.during, 99))} ms, max ${fmt(Math.max(...mainStall.during))} ms; idle p99 ${fmt(percentile(poolStall.idle, 99))} ms)`,
  ];
}
