// Runs in a pool thread (see render-pool.ts): one render per task. The bytes go back to the main
// thread by structured clone (a copy of a few hundred KB at most: cheaper than the render by far).
import type { InvoiceDocument } from '../domain/invoice-document.js';
import type { PdfKind } from './layout.js';
import { renderDocumentPdf } from './render-document-pdf.js';

export interface RenderTask {
  doc: InvoiceDocument;
  kind: PdfKind;
}

export default async function renderInThread({ doc, kind }: RenderTask): Promise<Uint8Array> {
  return new Uint8Array(await renderDocumentPdf(doc, kind));
}
