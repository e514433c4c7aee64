// The render-threads pass: one worker process with 1, 2 and all PDF render threads, each beside raw
// pdfkit run as that many processes at once and the raw limit on as many cores.
import { fmt, table, type BenchBackend } from '../support.js';
import { runNotedPass, type PassResult } from './pass.js';
import type { RawMailResult, RawPdfRun } from './raw-limits.js';
import type { Env } from './setup.js';

/** One worker, each of `threadCounts` render threads; the count the max pass already ran at (the
 * default) is not run twice, unless only fixed-rate passes ran. */
export async function runThreadPasses(
  env: Env,
  opts: { n: number; concurrency: number; sendConcurrency: number; threadCounts: number[]; defaultThreads: number; fixedRates: boolean },
): Promise<PassResult[]> {
  const mine: PassResult[] = [];
  for (const t of opts.threadCounts) {
    if (!opts.fixedRates && t === opts.defaultThreads) continue;
    mine.push(
      await runNotedPass(env, { label: `max 1w c${opts.concurrency} t${t}`, workers: 1, concurrency: opts.concurrency, n: opts.n, rate: null, sendConcurrency: opts.sendConcurrency, pdfThreads: t }),
    );
  }
  return mine;
}

export interface ThreadFigure {
  backend: BenchBackend;
  t: number;
  r: PassResult;
  /** Raw pdfkit as t processes at once. */
  rawK: RawPdfRun;
  /** The raw limit on t cores: the lower of rawK and nodemailer. */
  limitK: number;
}

/** Each (backend, thread count) pass that ran, with raw pdfkit on as many cores and the lower of
 * that and nodemailer: the table and the targets read the same rows. */
export function threadFigures(
  results: PassResult[],
  opts: { backends: BenchBackend[]; threadCounts: number[]; concurrency: number; onCores: Map<number, RawPdfRun>; mail: RawMailResult },
): ThreadFigure[] {
  const oneWorker = (backend: BenchBackend, t: number) =>
    results.find((r) => r.label.startsWith(`${backend} `) && r.mode === 'max' && r.workers === 1 && r.concurrency === opts.concurrency && r.pdfThreads === t);
  return opts.backends.flatMap((backend) =>
    opts.threadCounts.flatMap((t) => {
      const r = oneWorker(backend, t);
      const rawK = opts.onCores.get(t);
      return r && rawK ? [{ backend, t, r, rawK, limitK: Math.min(rawK.total, opts.mail.perSecond) }] : [];
    }),
  );
}

/** The report's render-threads table (nothing when no thread pass ran). */
export function threadSection(figures: ThreadFigure[], opts: { concurrency: number; threadCounts: number[]; cores: number; defaultThreads: number; rawLimit: number }): string[] {
  if (!figures.length) return [];
  const rows = figures.map(({ t, r, rawK, limitK }) => [
    r.label,
    t,
    fmt(r.perSecond),
    fmt(rawK.total),
    fmt(r.perSecond / rawK.total, 2),
    fmt(limitK),
    fmt(r.perSecond / limitK, 2),
    fmt(r.perSecond / opts.rawLimit, 2),
    fmt(r.workerCpuMsPerMsg, 2),
    fmt(r.peakRssMiB[0], 0),
    fmt(r.machineBusy, 0),
  ]);
  return [
    '',
    `One worker process (concurrency ${opts.concurrency}), PDF_RENDER_THREADS = ${opts.threadCounts.join(', ')} (${opts.cores} = all cores; default ${opts.defaultThreads}), beside raw pdfkit run as that many processes at once (sum)`,
    table(
      ['pass', 'threads', 'sends/s', 'raw pdfkit k procs/s', 'x pdfkit k', 'raw limit k/s (lower of pdfkit k, nodemailer)', 'x raw limit k', 'x 1-core raw limit', 'worker cpu ms each', 'peak RSS MiB', 'machine busy %'],
      rows,
    ),
  ];
}

/** One worker with t render threads >= 0.7x the raw limit on t cores. */
export function threadTargets(figures: ThreadFigure[]): string[] {
  return figures.map(
    ({ backend, t, r, rawK, limitK }) =>
      `  ${backend} one worker, ${t} render thread(s): ${fmt(r.perSecond)}/s = ${fmt(r.perSecond / limitK, 2)}x the raw limit on ${t} core(s) (${fmt(limitK)}/s; pdfkit x${t} ${fmt(rawK.total)}/s) vs >= 0.7: ${r.perSecond / limitK >= 0.7 ? 'met' : 'MISSED'}`,
  );
}
