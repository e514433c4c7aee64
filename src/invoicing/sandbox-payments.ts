// What the on-chain payment detector does, for the sandbox: mark an invoice paid, take a payment
// on a link. One implementation, used by the test-helper routes and by the payment page's
// "Simulate payment" button, so both go through exactly the same path.
import { randomBytes } from 'node:crypto';
import { findInvoice, markPaid, type InvoiceRow, type Scope } from '../db/invoices.js';
import { insertLinkPayment, type LinkPaymentRow } from '../db/payment-links.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { newId } from '../domain/ids.js';
import { nextStatus } from '../domain/invoice-rules.js';
import { Money, toAtomic } from '../domain/money.js';
import { DomainError, missing } from '../errors.js';
import { pendingReceiptJob } from '../db/outbox.js';
import type { OutboxPublisher } from '../queue/outbox.js';
import type { ReminderControl } from '../queue/reminder-service.js';
import { linkChargeAmount, lockChargeableLink } from './link-charge.js';
import { accept } from './refuse.js';

const fakeTxHash = () => `0x${randomBytes(32).toString('hex')}`;

interface Log {
  warn(o: object, m: string): void;
}

/**
 * open|overdue -> paid, then the reminder schedule goes (the paid re-check in the reminder job
 * and the database trigger stop every email even when Redis is away), and the receipt the
 * database queued is handed to BullMQ at once (the worker's outbox relay would otherwise).
 */
export async function payInvoice(
  deps: { pool: Pool; reminders?: ReminderControl; outbox?: OutboxPublisher },
  scope: Scope,
  invoiceId: string,
  log: Log,
): Promise<InvoiceRow> {
  const paid = await markPaid(deps.pool, scope, invoiceId);
  if (!paid) {
    const inv = await findInvoice(deps.pool, scope, invoiceId);
    if (!inv) throw missing('invoice', invoiceId);
    accept(nextStatus(inv.status, 'pay'));
    throw new DomainError('invoice_not_payable', 'This invoice cannot be paid now.');
  }
  if (deps.reminders) {
    try {
      await deps.reminders.stop(paid.id);
    } catch (err) {
      log.warn({ err, invoice_id: paid.id }, 'could not remove reminder schedules now; the paid re-check still stops every email');
    }
  }
  if (deps.outbox) {
    try {
      const receipt = await pendingReceiptJob(deps.pool, paid.id);
      if (receipt) {
        await deps.outbox.publish([{ job_name: 'invoice.receipt', job_id: receipt.job_id, payload: { invoiceId: paid.id, deliveryId: receipt.delivery_id } }]);
      }
    } catch (err) {
      log.warn({ err, invoice_id: paid.id }, 'could not enqueue the receipt now; the outbox relay will');
    }
  }
  return paid;
}

/** A payment on an active link: the link's price, or an amount within a custom link's range. */
export async function recordLinkPayment(
  pool: Pool,
  scope: Scope,
  linkId: string,
  body: { amount?: string; customer_email?: string },
): Promise<LinkPaymentRow> {
  return withTransaction(pool, async (tx) => {
    const link = await lockChargeableLink(tx, scope, linkId);
    const amount = await linkChargeAmount(tx, scope, link, body.amount);
    return insertLinkPayment(tx, {
      id: newId('simpay'),
      linkId: link.id,
      amount,
      amountAtomic: toAtomic(new Money(amount), link.token_decimals),
      customerEmail: body.customer_email ?? null,
      txHash: fakeTxHash(),
    });
  });
}
