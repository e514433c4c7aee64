// The document of a sent invoice: rendered once, then kept. The invoice email attaches it, the
// reminders attach it, and a download returns it, byte for byte (see db/invoice-pdfs.ts).
import { findInvoicePdf, keepInvoicePdf } from '../db/invoice-pdfs.js';
import type { Queryable } from '../db/pool.js';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { renderInvoicePdf } from './invoice-pdf.js';
import type { PdfKind } from './layout.js';

/** Renders a document's PDF: the invoice (default) or its receipt; the pool's, or the main thread's. */
export type RenderPdf = (doc: InvoiceDocument, kind?: PdfKind) => Promise<Buffer>;

/** The kept PDF of a sent invoice, rendering and keeping it on first use. */
export async function issuedInvoicePdf(db: Queryable, doc: InvoiceDocument, render: RenderPdf = renderInvoicePdf): Promise<Buffer> {
  const kept = await findInvoicePdf(db, doc.invoiceId);
  if (kept) return kept;
  return keepInvoicePdf(db, doc.invoiceId, await render({ ...doc, stamp: undefined }));
}
