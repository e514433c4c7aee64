// Either PDF by its kind: the one entry a caller that holds a kind (a render thread, the email
// step) goes through.
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { renderInvoicePdf } from './invoice-pdf.js';
import type { PdfKind } from './layout.js';
import { renderReceiptPdf } from './receipt-pdf.js';

/** Either document by its kind: what a render thread runs, and the main thread's RenderPdf. */
export function renderDocumentPdf(doc: InvoiceDocument, kind: PdfKind = 'invoice'): Promise<Buffer> {
  return kind === 'receipt' ? renderReceiptPdf(doc) : renderInvoicePdf(doc);
}
