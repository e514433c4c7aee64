// The send of an invoice (draft -> open), one implementation for POST /v1/invoices/{id}/send and
// for a payment link's checkout (POST /pay/<link id>/checkout), so a checkout gets its code and its
// payment reference exactly as any sent invoice; only the invoice email is not owed for a checkout.
import { findSettlementAddress } from '../db/accounts.js';
import { upsertDelivery } from '../db/deliveries.js';
import { findInvoice, markSent, nextInvoiceNumber, type InvoiceRow, type Scope } from '../db/invoices.js';
import type { PoolClient } from '../db/pool.js';
import { formatInvoiceCode, newId } from '../domain/ids.js';
import { nextStatus } from '../domain/invoice-rules.js';
import { newPaymentTarget } from '../domain/payments.js';
import { ApiError, notFound } from '../errors.js';
import { messageIdFor } from '../mail/message-id.js';
import { enqueueInTransaction, type OutboxJob } from '../queue/outbox.js';
import { unwrap } from './route-helpers.js';

/**
 * Issues a draft inside the caller's transaction (draft -> open): its code, and the settlement
 * address and payment reference fixed now. Owes no email: a payment link's checkout is issued
 * this way, since its address was typed by an anonymous visitor (the receipt goes there once paid).
 */
export async function issueInvoiceInTransaction(tx: PoolClient, scope: Scope, invoiceId: string): Promise<InvoiceRow> {
  const inv = await findInvoice(tx, scope, invoiceId, true);
  if (!inv) throw notFound('invoice', invoiceId);
  unwrap(nextStatus(inv.status, 'send'));
  if (inv.amount === null) {
    throw new ApiError('invoice_amount_missing', 'This invoice has no amount; set amount or line_items before sending it.');
  }
  const code = formatInvoiceCode(scope.environment, await nextInvoiceNumber(tx, scope));
  // The address it is paid to and its payment reference are fixed now: a later change of
  // the settlement address concerns invoices sent after it.
  const settlement = await findSettlementAddress(tx, scope);
  const sent = await markSent(tx, inv.id, code, settlement === null ? null : newPaymentTarget(inv.id, settlement));
  if (!sent) throw new ApiError('invoice_already_sent', 'This invoice was already sent.');
  return sent;
}

/**
 * Sends a draft inside the caller's transaction: issued (issueInvoiceInTransaction) and the
 * invoice email owed (delivery + outbox row). Publish the returned job after commit
 * (publishQuietly).
 */
export async function sendInvoiceInTransaction(
  tx: PoolClient,
  scope: Scope,
  invoiceId: string,
  mailFrom: string,
): Promise<{ row: InvoiceRow; job: OutboxJob<'invoice.send'> }> {
  const sent = await issueInvoiceInTransaction(tx, scope, invoiceId);
  // The email is owed from this commit on: the delivery and its outbox row are written in
  // the same transaction as the status change, so a crash cannot lose the send.
  const deliveryId = newId('dlv');
  const delivery = await upsertDelivery(tx, {
    id: deliveryId,
    invoiceId: sent.id,
    kind: 'invoice',
    slotAt: sent.sent_at!,
    messageId: messageIdFor(deliveryId, mailFrom),
  });
  const job = await enqueueInTransaction(tx, 'invoice.send', { invoiceId: sent.id, deliveryId: delivery.id });
  return { row: sent, job };
}
