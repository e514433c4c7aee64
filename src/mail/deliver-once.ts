// Sends the email of one delivery row at most once. The row is locked for the length of the
// SMTP conversation, so two workers holding the same job (a duplicate, a stalled job picked up
// again) cannot both send; once the SMTP server accepted the message the row says 'sent' and
// every later run of the job is a no-op.
import { lockDelivery, markDeliveryFailed, markDeliverySent } from '../db/deliveries.js';
import { emitInvoiceEvent } from '../db/events.js';
import type { Pool, PoolClient } from '../db/pool.js';
import { PermanentJobError } from '../errors.js';
import { classifySmtpError, type MailTransport, type OutgoingMail } from './transport.js';

/** Another worker is sending this delivery right now; retry later and find it sent. */
export class DeliveryBusyError extends Error {
  override readonly name = 'DeliveryBusyError';
}

export type DeliveryOutcome =
  | { sent: true; messageId: string; location?: string }
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
  const client = await pool.connect();
  let open = false;
  try {
    await client.query('begin');
    open = true;
    const delivery = await lockDelivery(client, deliveryId);
    if (!delivery) throw new DeliveryBusyError(`delivery ${deliveryId} is being sent by another worker`);
    if (delivery.status === 'sent') {
      await client.query('rollback');
      open = false;
      return { sent: false, reason: 'already_sent' };
    }
    if (guard && !(await guard(client))) {
      await client.query('rollback');
      open = false;
      return { sent: false, reason: 'no_longer_due' };
    }
    let result: Awaited<ReturnType<MailTransport['send']>>;
    try {
      result = await transport.send(buildMessage(delivery.message_id));
    } catch (err) {
      const kind = classifySmtpError(err);
      const reason = err instanceof Error ? err.message : String(err);
      await markDeliveryFailed(client, deliveryId, kind === 'permanent' ? 'failed' : 'retrying', reason);
      // The merchant hears of an email that will never go out, in the same transaction.
      if (kind === 'permanent') await emitInvoiceEvent(client, delivery.invoice_id, 'invoice.email_failed');
      await client.query('commit');
      open = false;
      if (kind === 'permanent') throw new PermanentJobError(`permanent SMTP failure: ${reason}`, { cause: err });
      throw err;
    }
    await markDeliverySent(client, deliveryId);
    if (delivery.kind === 'reminder_before' || delivery.kind === 'reminder_after') {
      // Told to the merchant with the sent mark, so a crash right after cannot lose it. The
      // invoice row is only read here: updating it (last_reminder_at, done by the job after
      // commit) would turn this transaction's share lock into an exclusive one, and two slots
      // of one invoice in flight at once would deadlock after their emails went out.
      await emitInvoiceEvent(client, delivery.invoice_id, 'invoice.reminder_sent', { last_reminder_at: new Date().toISOString() });
    }
    await client.query('commit');
    open = false;
    return { sent: true, messageId: delivery.message_id, location: result.location };
  } finally {
    if (open) await client.query('rollback').catch(() => undefined);
    client.release();
  }
}
