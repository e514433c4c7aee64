// Runs in a pool thread (see render-pool.ts): one render per task. The bytes go back to the main
// thread by structured clone (a copy of a few hundred KB at most: cheaper than the render by far).
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { renderInvoicePdf } from './render-invoice-pdf.js';

export default async function renderInThread(doc: InvoiceDocument): Promise<Uint8Array> {
  return new Uint8Array(await renderInvoicePdf(doc));
}
