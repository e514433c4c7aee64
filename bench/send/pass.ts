// One timed pipeline pass: N drafts sent over HTTP to a fresh set of worker processes, as fast as
// possible or at a fixed rate, measured from the HTTP send to the sink accepting the message.
import { busyPercent, cpuDelta, cpuMsOf, cpuSnapshot, fmt, loadAvg, machineCpu, memoryOf, note, percentile, randomSuffix, sleep } from '../support.js';
import { defaultPdfThreads, jobStats, sendAtRate, sendFlat, startWorkers, waitForWorkers, type Env, type SendRecord } from './setup.js';

export interface PassResult {
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
  /** Send jobs of this pass with a failed attempt (retried or not): the figure then includes failures. */
  failedJobs: number;
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

export async function runPass(
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
      failedJobs: stats.failed,
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
    if (profileTag) env.profiles.push({ label: opts.label, tag: profileTag, invoices: opts.n + warmCount });
  }
}

/** runPass, then one line with its rate and latency. */
export async function runNotedPass(env: Env, opts: Parameters<typeof runPass>[1]): Promise<PassResult> {
  const r = await runPass(env, opts);
  note(`${r.label}: ${fmt(r.perSecond)}/s, p50 ${fmt(r.latP50, 0)} ms, p99 ${fmt(r.latP99, 0)} ms`);
  return r;
}
