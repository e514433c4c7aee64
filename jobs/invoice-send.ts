// `invoice.send`: renders the invoice PDF and emails it to the customer, exactly once per
// delivery, then puts the invoice on its reminder schedule.
import { deletePendingDelivery, markDeliveryFailed } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { lockIfNotVoid } from '../src/db/invoices.js';
import { PermanentJobError } from '../src/errors.js';
import type { InvoiceSendPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';
import { emailInvoiceDocument } from './steps/email-invoice-document.js';

export const invoiceSend: JobHandler<InvoiceSendPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  let outcome = 'already_sent';
  if (loaded.deliveryStatus !== 'sent') {
    // An invoice voided before its email went out is never emailed: the customer would receive a
    // document that is no longer owed. The guard's share lock makes a void that commits meanwhile
    // wait for the SMTP conversation, so it is one or the other, never both.
    const result = await emailInvoiceDocument(ctx, loaded, 'invoice', payload.deliveryId, (tx) => lockIfNotVoid(tx, payload.invoiceId));
    if (result.sent) {
      outcome = 'sent';
      ctx.log.info({ message_id: result.messageId, ...(result.location ? { eml: result.location } : {}) }, 'invoice emailed');
    } else if (result.reason === 'no_longer_due') {
      outcome = 'voided';
      // Never attempted: nothing is owed any more, the row goes. Attempted before (SMTP trouble):
      // it ends failed, saying why.
      await deletePendingDelivery(ctx.pool, payload.deliveryId);
      await markDeliveryFailed(ctx.pool, payload.deliveryId, 'failed', 'the invoice was voided before its email went out');
      ctx.log.info('invoice voided before its email went out; not sent');
    }
  }
  ctx.countEmail?.('invoice', outcome === 'sent' ? 'sent' : 'skipped');
  // Also on a re-run: a crash after the email but before scheduling must still schedule.
  await ctx.reminders.afterSend(payload.invoiceId);
  return outcome;
};
