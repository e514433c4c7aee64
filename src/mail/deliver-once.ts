// Sends the email of one delivery row at most once. The row is locked for the length of the
// SMTP conversation, so two workers holding the same job (a duplicate, a stalled job picked up
// again) cannot both send; once the SMTP server accepted the message the row says 'sent' and
// every later run of the job is a no-op.
import { lockDelivery, markDeliveryFailed, markDeliverySent } from '../db/deliveries.js';
import { emitInvoiceEvent } from '../db/events.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { PermanentJobError } from '../errors.js';
import { classifySmtpError, type MailTransport, type OutgoingMail } from './transport.js';

/** Another worker is sending this delivery right now; retry later and find it sent. */
export class DeliveryBusyError extends Error {
  override readonly name = 'DeliveryBusyError';
}

export type DeliveryOutcome =
  | { sent: true; messageId: string; location?: string; transport: string; destination: string }
  | { sent: false; reason: 'already_sent' | 'no_longer_due' };

/**
 * Runs inside the delivery's transaction, just before the SMTP conversation; false cancels the
 * send. A guard that locks the invoice row (FOR SHARE) makes a concurrent "paid" wait for the
 * email to finish, so no reminder ever leaves after the payment committed.
 */
export type DeliveryGuard = (tx: PoolClient) => Promise<boolean>;

export async function deliverOnce(
  pool: Pool,
  transport: MailTransport,
  deliveryId: string,
  buildMessage: (messageId: string) => OutgoingMail,
  guard?: DeliveryGuard,
): Promise<DeliveryOutcome> {
  // A refused send commits a transaction that only read and locked: the same as a rollback. A
  // failed one commits its failure mark, then throws outside the transaction.
  const outcome = await withTransaction(pool, async (tx): Promise<DeliveryOutcome | { failed: unknown; permanent: boolean; reason: string }> => {
    const delivery = await lockDelivery(tx, deliveryId);
    if (!delivery) throw new DeliveryBusyError(`delivery ${deliveryId} is being sent by another worker`);
    if (delivery.status === 'sent') return { sent: false, reason: 'already_sent' };
    if (guard && !(await guard(tx))) return { sent: false, reason: 'no_longer_due' };
    let result: Awaited<ReturnType<MailTransport['send']>>;
    try {
      result = await transport.send(buildMessage(delivery.message_id));
    } catch (err) {
      const permanent = classifySmtpError(err) === 'permanent';
      const reason = err instanceof Error ? err.message : String(err);
      await markDeliveryFailed(tx, deliveryId, permanent ? 'failed' : 'retrying', reason);
      // The merchant hears of an email that will never go out, in the same transaction.
      if (permanent) await emitInvoiceEvent(tx, delivery.invoice_id, 'invoice.email_failed');
      return { failed: err, permanent, reason };
    }
    await markDeliverySent(tx, deliveryId, result);
    return { sent: true, messageId: delivery.message_id, location: result.location, transport: result.transport, destination: result.destination };
  });
  if ('failed' in outcome) {
    if (outcome.permanent) throw new PermanentJobError(`permanent SMTP failure: ${outcome.reason}`, { cause: outcome.failed });
    throw outcome.failed;
  }
  return outcome;
}
