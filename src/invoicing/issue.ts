// Issuing and sending an invoice (draft -> open), one implementation for POST /v1/invoices/{id}/send,
// for a payment link's checkout (POST /pay/<link id>/checkout) and for any job that issues one (a
// subscription's period invoice), so every invoice gets its code and its payment reference the same
// way; only the invoice email is not owed for a checkout. Below HTTP: refusals are DomainErrors.
import { findSettlementAddress } from '../db/accounts.js';
import { upsertDelivery } from '../db/deliveries.js';
import { findInvoice, markSentMany, nextInvoiceNumbers, type InvoiceRow, type Scope } from '../db/invoices.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { formatInvoiceCode, newId } from '../domain/ids.js';
import { nextStatus } from '../domain/invoice-rules.js';
import { newPaymentTarget } from '../domain/payments.js';
import { DomainError, missing } from '../errors.js';
import { messageIdFor } from '../mail/message-id.js';
import { enqueueInTransaction, type OutboxJob } from '../queue/outbox.js';
import { accept } from './refuse.js';

/** A sent invoice and its `invoice.send` job, committed in the outbox: publish it after commit, or leave it to the relay. */
export interface SentInvoice {
  row: InvoiceRow;
  job: OutboxJob<'invoice.send'>;
}

/**
 * Issues a draft inside the caller's transaction (draft -> open): its code, and the settlement
 * address and payment reference fixed now. Owes no email: a payment link's checkout is issued
 * this way, since its address was typed by an anonymous visitor (the receipt goes there once paid).
 * `payTo`: the address it is paid to, instead of the account's settlement address.
 */
export async function issueInvoiceInTransaction(tx: PoolClient, scope: Scope, invoiceId: string, payTo?: string): Promise<InvoiceRow> {
  const inv = await findInvoice(tx, scope, invoiceId, true);
  if (!inv) throw missing('invoice', invoiceId);
  accept(nextStatus(inv.status, 'send'));
  if (inv.amount === null) {
    throw new DomainError('invoice_amount_missing', 'This invoice has no amount; set amount or line_items before sending it.');
  }
  // A subscription's period is paid to the payee its contract terms fixed (`payTo`), whatever the
  // account's settlement address is today.
  const settlement = payTo ?? (await findSettlementAddress(tx, scope));
  const [sent] = await issueDraftsInTransaction(tx, scope, [{ id: inv.id, payTo: settlement }]);
  if (!sent) throw new DomainError('invoice_already_sent', 'This invoice was already sent.');
  return sent;
}

/**
 * The issuing itself, for drafts the caller has checked (issueInvoiceInTransaction) or has just
 * made with their amounts (a batch of subscription period invoices): consecutive codes taken at
 * once, in the order given, and each draft open with its code, the address it is paid to and its
 * payment reference, fixed now (a later change of the settlement address concerns invoices sent
 * after it). Returns the rows issued (a draft issued meanwhile by someone else is not).
 */
export async function issueDraftsInTransaction(tx: PoolClient, scope: Scope, drafts: readonly { id: string; payTo: string | null }[]): Promise<InvoiceRow[]> {
  if (drafts.length === 0) return [];
  const first = await nextInvoiceNumbers(tx, scope, drafts.length);
  return markSentMany(
    tx,
    drafts.map((d, i) => ({
      id: d.id,
      code: formatInvoiceCode(scope.environment, first + i),
      target: d.payTo === null ? null : newPaymentTarget(d.id, d.payTo),
    })),
  );
}

/**
 * Sends a draft inside the caller's transaction: issued (issueInvoiceInTransaction) and the
 * invoice email owed (delivery + outbox row). `fastPath`: the caller publishes the returned job
 * after commit (publishQuietly in a route), so the workers' relay leaves it alone meanwhile;
 * without it (in a job) the relay hands it over.
 */
export async function sendInvoiceInTransaction(tx: PoolClient, scope: Scope, invoiceId: string, mailFrom: string, fastPath = false): Promise<SentInvoice> {
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
  const job = await enqueueInTransaction(tx, 'invoice.send', { invoiceId: sent.id, deliveryId: delivery.id }, { fastPath });
  return { row: sent, job };
}

/** issueInvoiceInTransaction in a transaction of its own. */
export async function issueInvoice(pool: Pool, scope: Scope, invoiceId: string): Promise<InvoiceRow> {
  return withTransaction(pool, (tx) => issueInvoiceInTransaction(tx, scope, invoiceId));
}

/** sendInvoiceInTransaction in a transaction of its own. */
export async function sendInvoice(pool: Pool, scope: Scope, invoiceId: string, mailFrom: string, fastPath = false): Promise<SentInvoice> {
  return withTransaction(pool, (tx) => sendInvoiceInTransaction(tx, scope, invoiceId, mailFrom, fastPath));
}
