// Runs in a pool thread (see render-pool.ts): one render per task. The bytes go back to the main
// thread by structured clone (a copy of a few hundred KB at most: cheaper than the render by far).
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import type { PdfKind } from './layout.js';
import { renderDocumentPdf } from './render-document-pdf.js';

export interface RenderTask {
  doc: InvoiceDocument;
  kind: PdfKind;
}

/**
 * Documents are background work: a receipt may go out a second later, a charge or a payment
 * being recorded may not wait. The thread runs at this niceness, so when the cores are contended
 * (a burst of charges paying a burst of invoices, each with a receipt to render) the event loop,
 * Postgres and the chain node go first; on an idle machine it renders as fast as before.
 */
const RENDER_NICENESS = 10;

lowerThreadPriority();

function lowerThreadPriority(): void {
  // Linux: setpriority() on a thread id applies to that thread alone (/proc/thread-self names it).
  // Elsewhere, or where it is refused, the thread keeps the process's priority.
  if (process.platform !== 'linux') return;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, RENDER_NICENESS);
  } catch {
    // Not fatal: only the order in which contended work gets a core.
  }
}

export default async function renderInThread({ doc, kind }: RenderTask): Promise<Uint8Array> {
  return new Uint8Array(await renderDocumentPdf(doc, kind));
}
