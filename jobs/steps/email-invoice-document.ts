// The step every email job shares: the document of its kind (the invoice's kept PDF, or for a
// receipt the receipt PDF) and the email of that kind, sent through the delivery row exactly once
// (deliverOnce). A failure is counted and rethrown, so BullMQ retries it.
import type { InvoiceForMail } from '../../src/db/invoice-for-mail.js';
import { deliverOnce, type DeliveryGuard, type DeliveryOutcome } from '../../src/mail/deliver-once.js';
import { emlFileName, invoiceEnvelope } from '../../src/mail/invoice-envelope.js';
import { renderEmail, type EmailKind } from '../../src/mail/render-email.js';
import { issuedInvoicePdf } from '../../src/pdf/issued-invoice-pdf.js';
import { renderDocumentPdf } from '../../src/pdf/render-document-pdf.js';
import type { JobContext } from '../../src/queue/job-context.js';

export async function emailInvoiceDocument(
  ctx: JobContext,
  loaded: InvoiceForMail,
  kind: EmailKind,
  deliveryId: string,
  guard?: DeliveryGuard,
  /** A reminder's planned slot (in its .eml name). */
  slotAt?: Date,
): Promise<DeliveryOutcome> {
  // The kept document: every email asking for payment attaches the same bytes as a download.
  const document = kind === 'receipt' ? 'receipt' : 'invoice';
  const pdf = document === 'receipt' ? await (ctx.renderPdf ?? renderDocumentPdf)(loaded.doc, 'receipt') : await issuedInvoicePdf(ctx.pool, loaded.doc, ctx.renderPdf);
  const email = renderEmail(kind, loaded.doc);
  const fileName = emlFileName(loaded.doc.code, kind, deliveryId, slotAt);
  try {
    return await deliverOnce(ctx.pool, ctx.mail, deliveryId, (messageId) => invoiceEnvelope(ctx.config, loaded, email, pdf, messageId, document, fileName), guard);
  } catch (err) {
    ctx.countEmail?.(kind, 'failed');
    throw err;
  }
}
