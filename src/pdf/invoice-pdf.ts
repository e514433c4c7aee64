// The invoice PDF: asks for payment, dated when the invoice was issued.
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { renderPdf } from './document-pdf.js';

/** The invoice PDF attached to the invoice email and the reminders. */
export async function renderInvoicePdf(doc: InvoiceDocument): Promise<Buffer> {
  return renderPdf(doc, 'invoice');
}
