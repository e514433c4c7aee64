// `invoice.receipt`: the "payment received" email with the receipt PDF, once per paid invoice.
// The delivery and this job's outbox row were written by the database in the transaction that
// marked the invoice paid (migration 1700000001201), whatever path did it.
import { ensureMessageId } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-document.js';
import { PermanentJobError } from '../src/errors.js';
import { deliverOnce } from '../src/mail/deliver-once.js';
import { messageIdFor } from '../src/mail/message-id.js';
import { renderEmail } from '../src/mail/render-email.js';
import { renderReceiptPdf } from '../src/pdf/render-invoice-pdf.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { InvoiceReceiptPayload } from '../src/queue/names.js';
import type { JobContext } from './context.js';
import { invoiceMessage } from './invoice-message.js';

export const invoiceReceipt: JobHandler<InvoiceReceiptPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config.paymentPageBase, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  if (loaded.deliveryStatus === 'sent') {
    ctx.countEmail?.('receipt', 'skipped');
    return 'already_sent';
  }
  await ensureMessageId(ctx.pool, payload.deliveryId, messageIdFor(payload.deliveryId, ctx.config.mailFrom));
  const pdf = await renderReceiptPdf(loaded.doc);
  const email = renderEmail('receipt', loaded.doc);
  const result = await deliverOnce(ctx.pool, ctx.mail, payload.deliveryId, (messageId) =>
    invoiceMessage(ctx.config, loaded, email, pdf, messageId, 'receipt'),
  ).catch((err: unknown) => {
    ctx.countEmail?.('receipt', 'failed');
    throw err;
  });
  ctx.countEmail?.('receipt', result.sent ? 'sent' : 'skipped');
  if (!result.sent) return result.reason;
  ctx.log.info({ message_id: result.messageId, ...(result.location ? { eml: result.location } : {}) }, 'receipt emailed');
  return 'sent';
};
