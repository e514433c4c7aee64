// `invoice.receipt`: the "payment received" email with the receipt PDF, once per paid invoice.
// The delivery and this job's outbox row were written by the database in the transaction that
// marked the invoice paid (migration 1700000001201), whatever path did it.
import { ensureMessageId } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { PermanentJobError } from '../src/errors.js';
import { messageIdFor } from '../src/mail/message-id.js';
import type { InvoiceReceiptPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';
import { emailInvoiceDocument } from './steps/email-invoice-document.js';

export const invoiceReceipt: JobHandler<InvoiceReceiptPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  if (loaded.deliveryStatus === 'sent') {
    ctx.countEmail?.('receipt', 'skipped');
    return 'already_sent';
  }
  // The database wrote the row without a Message-ID: it does not know MAIL_FROM's domain.
  await ensureMessageId(ctx.pool, payload.deliveryId, messageIdFor(payload.deliveryId, ctx.config.mailFrom));
  const result = await emailInvoiceDocument(ctx, loaded, 'receipt', payload.deliveryId);
  ctx.countEmail?.('receipt', result.sent ? 'sent' : 'skipped');
  if (!result.sent) return result.reason;
  ctx.log.info({ message_id: result.messageId, ...(result.location ? { eml: result.location } : {}) }, 'receipt emailed');
  return 'sent';
};
