// The pipeline passes against the raw limit: as fast as possible with 1 and 2 worker processes
// (the ratio to the raw limit, and whether a second process adds throughput), then at half that
// rate; or, with BENCH_RATES, only passes at fixed rates.
import { fmt, type BenchBackend } from '../support.js';
import { runNotedPass, type PassResult } from './pass.js';
import type { RawPdfRun } from './raw-limits.js';
import type { Env } from './setup.js';

/** How many invoices a rate pass sends: about 30 s of them, at least 50, at most half of N. */
function rateCount(n: number, rate: number): number {
  return Math.max(50, Math.min(Math.ceil(n / 2), Math.ceil(rate * 30)));
}

/** One backend's max and half-rate passes (or its fixed-rate passes), in the order they ran. */
export async function runRatioPasses(
  env: Env,
  opts: { n: number; concurrencies: number[]; sendConcurrency: number; halfFor: number[]; fixedRates: [number, number][] },
): Promise<PassResult[]> {
  const { n, concurrencies, sendConcurrency, fixedRates } = opts;
  const mine: PassResult[] = [];
  for (const [w, rate] of fixedRates) {
    mine.push(await runNotedPass(env, { label: `rate ${w}w c${concurrencies[0]}`, workers: w, concurrency: concurrencies[0], n: rateCount(n, rate), rate, sendConcurrency }));
  }
  for (const c of fixedRates.length ? [] : concurrencies) {
    for (const w of [1, 2]) {
      mine.push(await runNotedPass(env, { label: `max ${w}w c${c}`, workers: w, concurrency: c, n, rate: null, sendConcurrency }));
    }
  }
  const c0 = concurrencies[0];
  for (const w of fixedRates.length ? [] : opts.halfFor) {
    const max = mine.find((r) => r.mode === 'max' && r.workers === w && r.concurrency === c0);
    if (!max) continue;
    const rate = max.perSecond / 2;
    mine.push(await runNotedPass(env, { label: `half ${w}w c${c0}`, workers: w, concurrency: c0, n: rateCount(n, rate), rate, sendConcurrency }));
  }
  return mine;
}

/** A backend's max pass at the default render threads. */
export function maxOf(results: PassResult[], backend: BenchBackend, workers: number, c: number): PassResult | undefined {
  return results.find((r) => r.label.startsWith(`${backend} `) && r.mode === 'max' && !r.threadsSet && r.workers === workers && r.concurrency === c);
}

/** Per backend and worker concurrency: one worker's ratio to the raw limit, and what a second adds. */
export function ratioTargets(results: PassResult[], opts: { backends: BenchBackend[]; concurrencies: number[]; rawLimit: number; pdf1: RawPdfRun; pdf2: RawPdfRun }): string[] {
  const { rawLimit, pdf1, pdf2 } = opts;
  const out: string[] = [];
  for (const backend of opts.backends) {
    for (const c of opts.concurrencies) {
      const one = maxOf(results, backend, 1, c);
      const two = maxOf(results, backend, 2, c);
      if (!one || !two) continue;
      const ratio = one.perSecond / rawLimit;
      out.push(`  ${backend} c${c}: ratio (1 worker) ${fmt(ratio, 2)} vs >= 0.7: ${ratio >= 0.7 ? 'met' : 'MISSED'}`);
      out.push(
        `  ${backend} c${c}: second worker process: ${fmt(two.perSecond)}/s vs ${fmt(one.perSecond)}/s = x${fmt(two.perSecond / one.perSecond, 2)} (${two.perSecond > one.perSecond * 1.05 ? 'adds throughput' : 'does NOT add throughput'}; 2-process pdfkit alone: x${fmt(pdf2.total / pdf1.total, 2)})`,
      );
    }
  }
  return out;
}

/** The rate passes' latency target (p99 < 1 s). */
export function rateTargets(results: PassResult[]): string[] {
  return results
    .filter((x) => x.mode === 'rate')
    .map(
      (r) =>
        `  ${r.label}: p99 ${fmt(r.latP99, 0)} ms at ${fmt(r.targetRate!)}/s (achieved ${fmt(r.perSecond)}/s, max schedule lag ${fmt(r.maxRateLagMs ?? NaN, 0)} ms) vs < 1000 ms: ${r.latP99 < 1000 ? 'met' : 'MISSED'}; p99 without the first 5 s: ${fmt(r.latP99After5s, 0)} ms; sends slower than p99 were made at t=${r.slowAt}`,
    );
}
