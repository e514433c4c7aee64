// PDF rendering off the event loop: a pool of worker threads around the invoice and receipt
// renderers (tinypool).
// A 100-line invoice takes tens of milliseconds of pure CPU in pdfkit; on the main thread that
// blocks health checks, BullMQ lock renewal and every other job of the process. In the pool it
// blocks none of them, and one worker process uses as many cores as it has threads.
//
// Each thread parses the fonts once and renders exactly as the main thread would: the output is
// a pure function of the document (see document-pdf.ts), whichever thread renders it.
import Tinypool from 'tinypool';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import type { PdfKind } from './layout.js';
import type { RenderTask } from './render-thread.js';

export interface PdfRenderPool {
  /** The invoice PDF (default) or the receipt PDF of the document, rendered in a thread. */
  render(doc: InvoiceDocument, kind?: PdfKind): Promise<Buffer>;
  readonly threads: number;
  /** Lets renders in flight finish, then ends the threads. */
  close(): Promise<void>;
}

/**
 * The thread's entry: the compiled render-thread.js in production; from the TypeScript sources
 * (tsx, vitest) a small ESM file that loads render-thread.ts through tsx, since a worker thread
 * does not inherit the parent's TypeScript loader.
 */
function threadEntry(): string {
  const fromSources = import.meta.url.endsWith('.ts');
  return new URL(fromSources ? './render-thread.dev.mjs' : './render-thread.js', import.meta.url).href;
}

// `warm`: the threads start (and load pdfkit) with the process, so the first job does not pay for
// it (the worker). Otherwise they start on first use and end after a minute idle: a process that
// renders nothing (an API that serves no PDF) pays nothing.
export function createPdfRenderPool(threads: number, opts: { warm?: boolean } = {}): PdfRenderPool {
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`a PDF render pool needs at least one thread, got ${threads}`);
  const pool = new Tinypool({ filename: threadEntry(), minThreads: opts.warm ? threads : 0, maxThreads: threads, idleTimeout: 60_000 });
  let inFlight = 0;
  let drained: (() => void) | null = null;
  return {
    threads,
    async render(doc, kind = 'invoice') {
      inFlight++;
      try {
        const task: RenderTask = { doc, kind };
        const bytes = (await pool.run(task)) as Uint8Array;
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      } finally {
        if (--inFlight === 0) drained?.();
      }
    },
    async close() {
      if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
      await pool.destroy();
    },
  };
}
