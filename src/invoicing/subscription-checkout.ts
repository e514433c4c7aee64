// A subscription checkout (POST /pay/<link id>/subscribe, docs/subscriptions.md): a payment link
// whose price is recurring is subscribed to from the customer's wallet (approve, then the
// SubscriptionManager's subscribe(terms), which pays the first period). This makes, in one
// transaction, the first period's invoice exactly as a link checkout's (link-checkout.ts: the same
// limits, expiry, issued without email) and the subscription_checkouts row holding the EXACT terms
// the page hands the wallet, with a random 32-byte reference. The watcher makes the subscription
// once it sees a confirmed Subscribed event carrying that reference with those terms; a checkout
// never subscribed to is voided at its expiry like any checkout.
import { findSettlementAddress, findAccount } from '../db/accounts.js';
import type { InvoiceRow, Scope } from '../db/invoices.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { findPriceForUse } from '../db/products.js';
import { insertSubscriptionCheckout, type SubscriptionCheckoutRow } from '../db/subscription-checkouts.js';
import { chainById, type ChainRegistry } from '../domain/chains.js';
import { newId } from '../domain/ids.js';
import { MAX_TERMS_AMOUNT_ATOMIC, MAX_TERMS_PERIOD_SECONDS, newCheckoutReference } from '../domain/subscription-checkout.js';
import { DomainError } from '../errors.js';
import type { Config } from '../config.js';
import { insertCheckoutInvoice } from './link-checkout.js';
import { lockChargeableLink } from './link-charge.js';

/** The zero address: the fee address of terms without a fee (the contract allows it only then). */
const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

/**
 * The address new subscriptions on a chain name as their operator (the relayer's; src/chain's
 * Relayer.operatorAddress), or null when this deployment has no relayer there.
 */
export type OperatorAddressOf = (chainId: number) => string | null;

export interface SubscriptionCheckoutRequest {
  customerEmail: string;
  /** The subscriber's language (the page's): the first invoice's and the receipts' documents. */
  locale: string;
}

export interface SubscriptionCheckout {
  checkout: SubscriptionCheckoutRow;
  invoice: InvoiceRow;
}

/**
 * Why no subscription can start on this chain for this merchant now, or null when one can: the
 * chain has a SubscriptionManager and a relayer (operator), the merchant a settlement address, and
 * a fee address when the account takes a fee (the contract refuses a fee without one). The link
 * page asks it to show its button, the checkout to refuse.
 */
export function subscriptionRefusal(chains: ChainRegistry, chainId: number, settlementAddress: string | null, feeBps: number, operatorAddressOf: OperatorAddressOf): DomainError | null {
  const chain = chainById(chains, chainId);
  const network = chain?.network ?? `chain ${chainId}`;
  if (!chain?.subscriptionManager) {
    return new DomainError('subscription_not_available', `Subscriptions are not offered on ${network}: no subscription contract is configured for it.`);
  }
  if (operatorAddressOf(chainId) === null) {
    return new DomainError('subscription_not_available', `Subscriptions are not offered on ${network} right now: this service has no relayer for it.`);
  }
  if (settlementAddress === null) {
    return new DomainError('payment_link_not_payable', 'This payment link cannot be paid with a wallet yet: the merchant has no settlement address on its network.');
  }
  if (feeBps > 0 && !chain.feeAddress) {
    return new DomainError('subscription_not_available', `Subscriptions are not offered on ${network}: no fee address is configured for it.`);
  }
  return null;
}

/**
 * Makes the checkout, under the link's row lock: the link takes payments, its price is recurring
 * and active, its product active ("no new subscriptions can start on it" otherwise: refused here,
 * before the wallet is asked anything), the chain has a SubscriptionManager and an operator, the
 * merchant a settlement address; then the first invoice and the terms.
 */
export async function createSubscriptionCheckout(
  pool: Pool,
  config: Pick<Config, 'checkouts' | 'chains'>,
  operatorAddressOf: OperatorAddressOf,
  scope: Scope,
  linkId: string,
  req: SubscriptionCheckoutRequest,
): Promise<SubscriptionCheckout> {
  return withTransaction(pool, async (tx) => {
    const link = await lockChargeableLink(tx, scope, linkId);
    // findPriceForUse takes a share lock on the product: it cannot turn inactive until this
    // checkout commits, and one that did is refused here.
    const price = link.price_id === null ? null : await findPriceForUse(tx, scope, link.price_id);
    if (price === null || price.interval_seconds === null) {
      throw new DomainError('price_not_recurring', 'This payment link does not sell a subscription: its price is not recurring.');
    }
    if (!price.product_active) throw new DomainError('product_inactive', 'This product is no longer offered: no new subscriptions can start on it.');
    if (!price.active) throw new DomainError('price_inactive', 'This price is no longer offered: no new subscriptions can start on it.');
    if (BigInt(price.amount_atomic) > MAX_TERMS_AMOUNT_ATOMIC || price.interval_seconds > MAX_TERMS_PERIOD_SECONDS) {
      throw new DomainError('subscription_not_available', 'This price is beyond what the subscription contract can hold.');
    }
    const payee = await findSettlementAddress(tx, scope);
    const feeBps = (await findAccount(tx, scope.accountId))?.platform_fee_bps ?? 0;
    const refusal = subscriptionRefusal(config.chains, price.chain_id, payee, feeBps, operatorAddressOf);
    if (refusal) throw refusal;
    const chain = chainById(config.chains, price.chain_id)!;
    const operator = operatorAddressOf(chain.chainId)!;
    const invoice = await insertCheckoutInvoice(tx, config, scope, link, price.amount, req, 'subscription_checkout');
    const checkout = await insertSubscriptionCheckout(tx, scope, {
      id: newId('subco'),
      payment_link_id: link.id,
      price_id: price.id,
      customer_id: invoice.customer_id,
      invoice_id: invoice.id,
      checkout_reference: newCheckoutReference(),
      chain_id: chain.chainId,
      contract_address: chain.subscriptionManager!,
      payee_address: payee!,
      token_address: invoice.token_address,
      // The invoice's own amount: the contract pulls it whole each period, the fee included.
      amount_atomic: invoice.amount_atomic!,
      period_seconds: price.interval_seconds,
      fee_bps: feeBps,
      fee_address: feeBps > 0 ? chain.feeAddress! : (chain.feeAddress ?? ZERO_ADDRESS),
      operator_address: operator,
      ends_at: null,
    });
    return { checkout, invoice };
  });
}
