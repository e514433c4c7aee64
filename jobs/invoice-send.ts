// `invoice.send`: renders the invoice PDF and emails it to the customer, exactly once per
// delivery, then puts the invoice on its reminder schedule.
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { PermanentJobError } from '../src/errors.js';
import type { InvoiceSendPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';
import { emailInvoiceDocument } from './steps/email-invoice-document.js';

export const invoiceSend: JobHandler<InvoiceSendPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config.paymentPageBase, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  let outcome = 'already_sent';
  if (loaded.deliveryStatus !== 'sent') {
    const result = await emailInvoiceDocument(ctx, loaded, 'invoice', payload.deliveryId);
    if (result.sent) {
      outcome = 'sent';
      ctx.log.info({ message_id: result.messageId, ...(result.location ? { eml: result.location } : {}) }, 'invoice emailed');
    }
  }
  ctx.countEmail?.('invoice', outcome === 'sent' ? 'sent' : 'skipped');
  // Also on a re-run: a crash after the email but before scheduling must still schedule.
  await ctx.reminders.afterSend(payload.invoiceId);
  return outcome;
};
