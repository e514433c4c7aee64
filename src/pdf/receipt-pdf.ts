// The receipt PDF: confirms a payment, dated when the invoice was paid.
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { renderPdf } from './document-pdf.js';

/** The receipt PDF of a paid invoice (amount, token, network, paid date, invoice code). */
export async function renderReceiptPdf(doc: InvoiceDocument): Promise<Buffer> {
  if (!doc.paidAt) throw new RangeError(`a receipt needs paidAt (invoice ${doc.invoiceId})`);
  return renderPdf(doc, 'receipt');
}
