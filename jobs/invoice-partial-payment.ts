// `invoice.partial_payment`: the short email acknowledging one partial payment (what arrived, in
// which transaction, what remains, the link to pay the rest), once per payment. The delivery and
// this job's outbox row were written by the database at the commit that applied the payment
// (migration 1700000001750), whatever path applied it.
import { formatUnits } from 'viem';
import { ensureMessageId } from '../src/db/deliveries.js';
import { findPaymentForMail, loadInvoiceForMail } from '../src/db/invoice-for-mail.js';
import { explorerTxUrl } from '../src/domain/chains.js';
import { PermanentJobError } from '../src/errors.js';
import { deliverOnce } from '../src/mail/deliver-once.js';
import { emlFileName, invoiceEnvelope } from '../src/mail/invoice-envelope.js';
import { messageIdFor } from '../src/mail/message-id.js';
import { renderEmail } from '../src/mail/render-email.js';
import type { InvoicePartialPaymentPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const invoicePartialPayment: JobHandler<InvoicePartialPaymentPayload, JobContext> = async (payload, ctx) => {
  const loaded = await loadInvoiceForMail(ctx.pool, payload.invoiceId, ctx.config, payload.deliveryId);
  if (!loaded) throw new PermanentJobError(`invoice ${payload.invoiceId} does not exist`);
  if (loaded.deliveryStatus === null) throw new PermanentJobError(`delivery ${payload.deliveryId} does not exist`);
  if (loaded.deliveryStatus === 'sent') {
    ctx.countEmail?.('partial_payment', 'skipped');
    return 'already_sent';
  }
  const payment = await findPaymentForMail(ctx.pool, payload.invoiceId, payload.paymentId);
  if (!payment) throw new PermanentJobError(`payment ${payload.paymentId} of invoice ${payload.invoiceId} does not exist`);
  // The database wrote the row without a Message-ID: it does not know MAIL_FROM's domain.
  await ensureMessageId(ctx.pool, payload.deliveryId, messageIdFor(payload.deliveryId, ctx.config.mailFrom));
  const counted = BigInt(payment.counted_atomic);
  const doc = {
    ...loaded.doc,
    partialPayment: {
      amount: formatUnits(counted, loaded.tokenDecimals),
      remaining: formatUnits(BigInt(payload.remainingAtomic), loaded.tokenDecimals),
      txHash: payment.tx_hash,
      url: explorerTxUrl(ctx.config.chains, loaded.doc.chainId, payment.tx_hash),
    },
  };
  const email = renderEmail('partial_payment', doc);
  const fileName = emlFileName(doc.code, 'partial_payment', payload.deliveryId);
  let result;
  try {
    result = await deliverOnce(ctx.pool, ctx.mail, payload.deliveryId, (messageId) => invoiceEnvelope(ctx.config, loaded, email, null, messageId, 'invoice', fileName));
  } catch (err) {
    ctx.countEmail?.('partial_payment', 'failed');
    throw err;
  }
  ctx.countEmail?.('partial_payment', result.sent ? 'sent' : 'skipped');
  if (!result.sent) return result.reason;
  ctx.log.info({ message_id: result.messageId, payment_id: payload.paymentId, ...(result.location ? { eml: result.location } : {}) }, 'partial payment acknowledged');
  return 'sent';
};
