// `invoice.payment_failed`: the email of one failed charge attempt on a subscription's period
// invoice (what failed and by how much, the next attempt or what became of the subscription, the
// link to the invoice's page where the customer can top up, approve again or pay by wallet). Its
// delivery and outbox row were written with the attempt, in its transaction
// (jobs/subscriptions-charge.ts): one per attempt, sent once (deliver-once).
import { ensureMessageId } from '../src/db/deliveries.js';
import { loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { PermanentJobError } from '../src/errors.js';
import { deliverOnce } from '../src/mail/deliver-once.js';
import { emlFileName, invoiceEnvelope } from '../src/mail/invoice-envelope.js';
import { messageIdFor } from '../src/mail/message-id.js';
import { renderEmail } from '../src/mail/render-email.js';
import type { InvoicePaymentFailedPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const invoicePaymentFailed: JobHandler<InvoicePaymentFailedPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  if (loaded.deliveryStatus === 'sent') {
    ctx.countEmail?.('payment_failed', 'skipped');
    return 'already_sent';
  }
  await ensureMessageId(ctx.pool, payload.deliveryId, messageIdFor(payload.deliveryId, ctx.config.mailFrom));
  const doc = {
    ...loaded.doc,
    paymentFailure: {
      message: payload.failureMessage,
      attempt: payload.attempt,
      nextAttemptAt: payload.nextAttemptAt,
      finalAction: payload.finalAction,
    },
  };
  const email = renderEmail('payment_failed', doc);
  const fileName = emlFileName(doc.code, 'payment_failed', payload.deliveryId);
  let result;
  try {
    result = await deliverOnce(ctx.pool, ctx.mail, payload.deliveryId, (messageId) => invoiceEnvelope(ctx.config, loaded, email, null, messageId, 'invoice', fileName));
  } catch (err) {
    ctx.countEmail?.('payment_failed', 'failed');
    throw err;
  }
  ctx.countEmail?.('payment_failed', result.sent ? 'sent' : 'skipped');
  if (!result.sent) return result.reason;
  ctx.log.info({ message_id: result.messageId, attempt: payload.attempt, failure_code: payload.failureCode, ...(result.location ? { eml: result.location } : {}) }, 'failed charge attempt emailed');
  return 'sent';
};
