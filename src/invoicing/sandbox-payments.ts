// What the on-chain payment detector does, for the sandbox: mark an invoice paid, take a payment
// on a link. One implementation, used by the test-helper routes and by the payment page's
// "Simulate payment" button, so both go through exactly the same path.
import { randomBytes } from 'node:crypto';
import { findInvoice, type InvoiceRow, type Scope } from '../db/invoices.js';
import { lockPayableInvoice, writeInvoiceBalances } from '../db/payments.js';
import { insertLinkPayment, type LinkPaymentRow } from '../db/payment-links.js';
import { withTransaction, type Pool, type Queryable } from '../db/pool.js';
import { applyPaymentTo, dustFloorAtomic, remainingAtomic } from '../domain/payments.js';
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
 * A simulated payment of what remains, applied by the one rule every payment is applied by
 * (applyPaymentTo) and written by the same statement (writeInvoiceBalances): open|overdue -> paid,
 * the paid amount its total. No payment row: nothing moved on a chain. False when the invoice
 * takes no payment (a draft, paid or void one, or none of that id).
 */
export async function settleSimulated(tx: Queryable, scope: Scope, invoiceId: string): Promise<boolean> {
  const inv = await lockPayableInvoice(tx, scope, invoiceId);
  if (!inv) return false;
  const ledger = {
    status: inv.status,
    amountAtomic: BigInt(inv.amount_atomic ?? '0'),
    paidAtomic: BigInt(inv.amount_paid_atomic),
    feeAtomic: BigInt(inv.fee_atomic ?? '0'),
    feeCountedAtomic: BigInt(inv.fee_counted_atomic),
  };
  const application = applyPaymentTo(ledger, { receivedAtomic: remainingAtomic(ledger), feeReceivedAtomic: 0n }, { blockTime: new Date(), dustFloorAtomic: dustFloorAtomic(inv.token_decimals) });
  if (application.outcome !== 'applied') return false;
  await writeInvoiceBalances(tx, [
    {
      id: inv.id,
      amount_paid_atomic: application.ledger.paidAtomic.toString(),
      fee_counted_atomic: application.ledger.feeCountedAtomic.toString(),
      status: application.ledger.status,
      paid_at: application.paidAt?.toISOString() ?? null,
    },
  ]);
  return true;
}

/**
 * open|overdue -> paid (settleSimulated), then the reminder schedule goes (the paid re-check in the reminder job
 * and the database trigger stop every email even when Redis is away), and the receipt the
 * database queued is handed to BullMQ at once (the worker's outbox relay would otherwise).
 */
export async function payInvoice(
  deps: { pool: Pool; reminders?: ReminderControl; outbox?: OutboxPublisher },
  scope: Scope,
  invoiceId: string,
  log: Log,
): Promise<InvoiceRow> {
  const paid = await withTransaction(deps.pool, async (tx) => ((await settleSimulated(tx, scope, invoiceId)) ? findInvoice(tx, scope, invoiceId) : null));
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
