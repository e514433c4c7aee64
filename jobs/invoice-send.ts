// `invoice.send`: renders the invoice PDF and emails it to the customer, exactly once per
// delivery, then puts the invoice on its reminder schedule.
import { loadInvoiceForMail } from '../src/db/invoice-document.js';
import { PermanentJobError } from '../src/errors.js';
import { deliverOnce } from '../src/mail/deliver-once.js';
import { renderEmail } from '../src/mail/render-email.js';
import { issuedInvoicePdf } from '../src/pdf/issued-invoice-pdf.js';
import type { InvoiceSendPayload } from '../src/queue/names.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from './context.js';
import { invoiceMessage } from './invoice-message.js';

export const invoiceSend: JobHandler<InvoiceSendPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config.paymentPageBase, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  let outcome = 'already_sent';
  if (loaded.deliveryStatus !== 'sent') {
    // The kept document: every email of this invoice attaches the same bytes as a download.
    const pdf = await issuedInvoicePdf(ctx.pool, loaded.doc);
    const email = renderEmail('invoice', loaded.doc);
    const result = await deliverOnce(ctx.pool, ctx.mail, payload.deliveryId, (messageId) =>
      invoiceMessage(ctx.config, loaded, email, pdf, messageId),
    ).catch((err: unknown) => {
      ctx.countEmail?.('invoice', 'failed');
      throw err;
    });
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
