// bench:send's printed report: the header, the raw limits, the pipeline passes and where their CPU
// went, each pass's section and the targets, in that order.
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { codeVersion, createValidity, fmt, loadAvg, summarizeProfiles, table, type BenchBackend } from '../support.js';
import { backendTargets } from './backends.js';
import type { PassResult } from './pass.js';
import { ratioTargets, rateTargets } from './ratio.js';
import type { RawLimits, RawPdfRun } from './raw-limits.js';
import type { ProfiledPass } from './setup.js';
import { stallSection, stallTargets, type StallRun } from './stall.js';
import { threadFigures, threadSection, threadTargets } from './threads.js';

export interface SendReport {
  n: number;
  backends: BenchBackend[];
  concurrencies: number[];
  threadCounts: number[];
  cores: number;
  defaultThreads: number;
  startLoad: string;
  codeAtStart: string;
  raw: RawLimits;
  /** Raw pdfkit on one process again at the end, to see drift from other load on the machine. */
  pdf1After: RawPdfRun;
  results: PassResult[];
  stall: StallRun | null;
  profiles: ProfiledPass[];
  /** BENCH_CPU_PROF: the directory the workers wrote their profiles to. */
  profileDir: string;
}

/** The printed report, and whether any figure in it was measured over failures (then it is INVALID). */
export function formatReport(rep: SendReport): { text: string; invalid: boolean } {
  const { n, results, concurrencies } = rep;
  // A pass with a refused send, a failed job attempt (a retry is work the figure should not
  // hide) or a failed /healthz probe measured failures, not speed.
  const validity = createValidity();
  for (const r of results) {
    validity.expect(r.httpErrors === 0, r.label, `${r.httpErrors} send request(s) not answered 200`);
    validity.expect(r.failedJobs === 0, r.label, `${r.failedJobs} send job(s) with a failed attempt`);
  }
  for (const s of rep.stall?.stalls ?? []) {
    validity.expect(s.failedProbes === 0, s.label, `${s.failedProbes} /healthz probe(s) failed`);
    validity.expect(s.failedJobs === 0, s.label, `${s.failedJobs} render job(s) with a failed attempt`);
  }
  const { pdf1, pdf2, mail, mailLoad } = rep.raw;
  const pdf1After = rep.pdf1After;
  const pdfLimit = Math.max(pdf1.total, pdf1After.total);
  const rawLimit = Math.min(pdfLimit, mail.perSecond);
  const out: string[] = [];
  out.push('');
  out.push(`bench:send  N=${n}  backends ${rep.backends.join(', ')}  ${os.cpus().length} cpus (${os.cpus()[0]?.model ?? '?'}), node ${process.version}`);
  out.push(`load at start: ${rep.startLoad}; at end: ${loadAvg()}`);
  out.push(`code: ${rep.codeAtStart}${codeVersion() === rep.codeAtStart ? '' : `; at end: ${codeVersion()}`}`);
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
        `${r.mode === 'rate' ? `${r.label} @${fmt(r.targetRate!)}/s` : r.label}${validity.mark(r.label)}`,
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
  const threads = threadFigures(results, { backends: rep.backends, threadCounts: rep.threadCounts, concurrency: concurrencies[0], onCores: rep.raw.onCores, mail });
  out.push(...threadSection(threads, { concurrency: concurrencies[0], threadCounts: rep.threadCounts, cores: rep.cores, defaultThreads: rep.defaultThreads, rawLimit }));
  if (rep.stall?.stalls.length) out.push(...stallSection(rep.stall, concurrencies[0]));
  out.push('');
  out.push('Targets');
  if (validity.any()) out.push('  (a target judged on an INVALID pass, listed at the end, is not met whatever its line says)');
  if (rep.stall) out.push(...stallTargets(rep.stall));
  out.push(...threadTargets(threads));
  out.push(...ratioTargets(results, { backends: rep.backends, concurrencies, rawLimit, pdf1, pdf2 }));
  out.push(...backendTargets(results, concurrencies));
  out.push(...rateTargets(results));
  for (const p of rep.profiles) {
    // One directory per worker process; one profile per thread (main, and tsx's loader thread).
    const files = readdirSync(rep.profileDir)
      .filter((d) => d.startsWith(`${p.tag}-`))
      .flatMap((d) => readdirSync(path.join(rep.profileDir, d)).map((f) => path.join(rep.profileDir, d, f)));
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
  out.push('', ...validity.summary());
  return { text: `${out.join('\n')}\n`, invalid: validity.any() };
}
