// What the on-chain payment detector does, for the sandbox: mark an invoice paid, take a payment
// on a link. One implementation, used by the test-helper routes and by the payment page's
// "Simulate payment" button, so both go through exactly the same path.
import { randomBytes } from 'node:crypto';
import { findInvoice, markPaid, type InvoiceRow, type Scope } from '../db/invoices.js';
import { countPayments, findLink, insertLinkPayment, type LinkPaymentRow } from '../db/payment-links.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { findPriceForUse } from '../db/products.js';
import { newId } from '../domain/ids.js';
import { nextStatus } from '../domain/invoice-rules.js';
import { formatDecimal, Money, parseAmount, toAtomic } from '../domain/money.js';
import { ApiError, notFound } from '../errors.js';
import { pendingReceiptJob } from '../db/outbox.js';
import type { OutboxPublisher, ReminderControl } from './types.js';

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
    if (!inv) throw notFound('invoice', invoiceId);
    const verdict = nextStatus(inv.status, 'pay');
    if (!verdict.ok) throw new ApiError(verdict.code, verdict.message);
    throw new ApiError('invoice_not_payable', 'This invoice cannot be paid now.');
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
    // The row lock serialises payments on one link, so max_payments holds under concurrency.
    const link = await findLink(tx, scope, linkId, true);
    if (!link) throw notFound('payment link', linkId);
    if (link.status !== 'active') throw new ApiError('payment_link_inactive', 'This payment link is inactive and takes no payments.');
    if (link.max_payments !== null && (await countPayments(tx, link.id)) >= link.max_payments) {
      throw new ApiError('payment_link_exhausted', `This payment link already took its ${link.max_payments} payments.`);
    }
    let amount: string;
    if (link.type === 'fixed_price') {
      const price = await findPriceForUse(tx, scope, link.price_id!);
      amount = price!.amount;
      if (body.amount !== undefined) {
        const given = parseAmount(body.amount, link.token_decimals);
        if (!given.ok) throw new ApiError(given.code, given.message, 'amount');
        if (!given.value.equals(new Money(amount))) {
          throw new ApiError('amount_mismatch', `This link charges its price, ${amount} ${link.currency}.`, 'amount');
        }
      }
    } else {
      const raw = body.amount ?? link.preset_amount;
      if (raw === null) throw new ApiError('validation_failed', 'amount is required for a custom_amount link without a preset_amount.', 'amount');
      const given = parseAmount(raw, link.token_decimals);
      if (!given.ok) throw new ApiError(given.code, given.message, 'amount');
      if ((link.min_amount && given.value.lt(link.min_amount)) || (link.max_amount && given.value.gt(link.max_amount))) {
        throw new ApiError('amount_out_of_range', `amount must be between ${link.min_amount ?? '0'} and ${link.max_amount ?? 'any'} ${link.currency}.`, 'amount');
      }
      amount = formatDecimal(given.value);
    }
    return insertLinkPayment(tx, {
      id: newId('pay'),
      linkId: link.id,
      amount,
      amountAtomic: toAtomic(new Money(amount), link.token_decimals),
      customerEmail: body.customer_email ?? null,
      txHash: fakeTxHash(),
    });
  });
}
