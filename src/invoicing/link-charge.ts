// What a payment on a link may be, one implementation for its two paths: a simulated payment
// (sandbox-payments.ts) and a wallet checkout (link-checkout.ts). Refusals are DomainErrors.
import { countPayments, findLink, type PaymentLinkRow } from '../db/payment-links.js';
import type { Scope } from '../db/invoices.js';
import type { PoolClient } from '../db/pool.js';
import { findPriceForUse } from '../db/products.js';
import { formatDecimal, Money, parseAmount } from '../domain/money.js';
import { DomainError, missing } from '../errors.js';

/**
 * The link, row-locked for the caller's transaction, if it takes a payment now: active and below
 * its max_payments. The lock serialises payments and checkouts on one link, so max_payments
 * holds under concurrency for what the service itself records.
 */
export async function lockChargeableLink(tx: PoolClient, scope: Scope, linkId: string): Promise<PaymentLinkRow> {
  const link = await findLink(tx, scope, linkId, true);
  if (!link) throw missing('payment link', linkId);
  if (link.status !== 'active') throw new DomainError('payment_link_inactive', 'This payment link is inactive and takes no payments.');
  if (link.max_payments !== null && (await countPayments(tx, link.id)) >= link.max_payments) {
    throw new DomainError('payment_link_exhausted', `This payment link already took its ${link.max_payments} payments.`);
  }
  return link;
}

/**
 * The amount a one-time payment on the link charges: its price, or a given amount within a custom
 * link's range (or its preset). A recurring price's link sells a subscription
 * (subscription-checkout.ts), never a one-time payment, simulated or by wallet.
 */
export async function linkChargeAmount(tx: PoolClient, scope: Scope, link: PaymentLinkRow, given: string | undefined): Promise<string> {
  if (link.type === 'fixed_price') {
    const price = await findPriceForUse(tx, scope, link.price_id!);
    if (price!.interval_seconds !== null) {
      throw new DomainError('payment_link_not_payable', 'This payment link sells a subscription: subscribe with the wallet on its page (POST /pay/<link id>/subscribe).');
    }
    const amount = price!.amount;
    if (given !== undefined) {
      const parsed = parseAmount(given, link.token_decimals);
      if (!parsed.ok) throw new DomainError(parsed.code, parsed.message, 'amount');
      if (!parsed.value.equals(new Money(amount))) {
        throw new DomainError('amount_mismatch', `This link charges its price, ${amount} ${link.currency}.`, 'amount');
      }
    }
    return amount;
  }
  const raw = given ?? link.preset_amount;
  if (raw === null) throw new DomainError('validation_failed', 'amount is required for a custom_amount link without a preset_amount.', 'amount');
  const parsed = parseAmount(raw, link.token_decimals);
  if (!parsed.ok) throw new DomainError(parsed.code, parsed.message, 'amount');
  if ((link.min_amount && parsed.value.lt(link.min_amount)) || (link.max_amount && parsed.value.gt(link.max_amount))) {
    throw new DomainError('amount_out_of_range', `amount must be between ${link.min_amount ?? '0'} and ${link.max_amount ?? 'any'} ${link.currency}.`, 'amount');
  }
  return formatDecimal(parsed.value);
}
