// The raw limits on this machine, each in a process of its own (one core, like a worker): pdfkit
// alone on 1, 2 and k processes at once, and the project's nodemailer transport alone to the sink.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { InvoiceDocument } from '../../src/domain/invoice-document.js';
import { createMailTransport, type OutgoingMail } from '../../src/mail/transport.js';
import { renderEmail } from '../../src/mail/render-email.js';
import { renderInvoicePdf } from '../../src/pdf/invoice-pdf.js';
import { loadAvg, note, percentile, randomSuffix, runTsJson } from '../support.js';
import { writeSampleDocument, type Env } from './setup.js';

/** The child process that runs rawPdf / rawMail (`--raw-pdf` / `--raw-mail`). */
const RAW_CHILD = 'bench/send/raw-child.ts';

export interface RawPdfResult {
  renders: number;
  seconds: number;
  perSecond: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerRender: number;
  pdfBytes: number;
}

export async function rawPdf(docFile: string, seconds: number, warm = 30, minRenders = 50): Promise<RawPdfResult> {
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

export interface RawMailResult {
  messages: number;
  seconds: number;
  perSecond: number;
  attachmentBytes: number;
  cpuMsPerMessage: number;
}

export async function rawMail(docFile: string, smtpUrl: string, count: number): Promise<RawMailResult> {
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

/** `processes` copies of the raw-pdf child at once (one per core), renders/s summed. */
export async function measureRawPdf(docFile: string, processes: number, seconds: number, warm = 30, minRenders = 50): Promise<RawPdfRun> {
  const load = loadAvg();
  const perProcess = await Promise.all(
    Array.from({ length: processes }, () => runTsJson<RawPdfResult>(RAW_CHILD, ['--raw-pdf', docFile, String(seconds), String(warm), String(minRenders)])),
  );
  return { load, perProcess, total: perProcess.reduce((a, r) => a + r.perSecond, 0) };
}

/** `processes` raw-pdf children at once: the load before, each one's figures, renders/s summed. */
export interface RawPdfRun {
  load: string;
  perProcess: RawPdfResult[];
  total: number;
}

export interface RawLimits {
  pdf1: RawPdfRun;
  pdf2: RawPdfRun;
  mail: RawMailResult;
  mailLoad: string;
  /** The document every raw measurement renders (and the "after" run renders again). */
  docFile: string;
  /** Raw pdfkit with k processes at once, k = 1, 2 and each render-thread count of the thread passes. */
  onCores: Map<number, RawPdfRun>;
}

/** The raw limits before the pipeline, on one of the drafts of `env` as the worker loads it. */
export async function measureRawLimits(env: Env, pool: pg.Pool, tmp: string, opts: { seconds: number; mailCount: number; threadCounts: number[] }): Promise<RawLimits> {
  const rawPdfSeconds = opts.seconds;
  const docFile = path.join(tmp, 'doc.json');
  await writeSampleDocument(env, pool, docFile, { tag: 'sample', code: 'TEST-INV-000123' });
  note(`raw pdfkit, 1 process, ${rawPdfSeconds} s; ${loadAvg()}`);
  const pdf1 = await measureRawPdf(docFile, 1, rawPdfSeconds);
  note(`raw pdfkit, 2 processes in parallel, ${rawPdfSeconds} s; ${loadAvg()}`);
  const pdf2 = await measureRawPdf(docFile, 2, rawPdfSeconds);
  const mailLoad = loadAvg();
  note(`raw nodemailer (pool 5) -> sink, ${opts.mailCount} messages; ${mailLoad}`);
  const mail = await runTsJson<RawMailResult>(RAW_CHILD, ['--raw-mail', docFile, env.sink.url, String(opts.mailCount)]);
  const onCores = new Map<number, RawPdfRun>([
    [1, pdf1],
    [2, pdf2],
  ]);
  for (const k of opts.threadCounts.filter((t) => !onCores.has(t))) {
    note(`raw pdfkit, ${k} processes in parallel, ${rawPdfSeconds} s; ${loadAvg()}`);
    onCores.set(k, await measureRawPdf(docFile, k, rawPdfSeconds));
  }
  return { pdf1, pdf2, mail, mailLoad, docFile, onCores };
}
