// A payment link's checkout (POST /pay/<link id>/checkout): an invoice of the link for one payment,
// issued at once (code, payment reference) but emailed to nobody, then paid on-chain by the payer's
// wallet exactly as any invoice; the receipt goes to the given email once it is paid. It counts as
// one of the link's payments once a confirmed payment applied to it (payment_link_payment_count).
//
// Anyone may make one, naming any email: so nothing is sent before money moved, the unpaid
// checkouts of a link and of an email are bounded (CHECKOUT_LIMIT_PER_LINK, CHECKOUT_LIMIT_PER_EMAIL
// in the last hour), and an unpaid one is voided after CHECKOUT_EXPIRY (jobs/checkouts-expire.ts).
import { findAccount, findSettlementAddress } from '../db/accounts.js';
import { countRecentCheckouts, markCheckout } from '../db/checkouts.js';
import { upsertCustomer } from '../db/customers.js';
import { insertInvoice, replaceLines, type InvoiceRow, type Scope } from '../db/invoices.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import type { PaymentLinkRow } from '../db/payment-links.js';
import { chainById, type ChainRegistry } from '../domain/chains.js';
import { newId, newInvoiceReference } from '../domain/ids.js';
import { feeAtomic, Money, toAtomic } from '../domain/money.js';
import { resolveToken } from '../domain/tokens.js';
import { DomainError } from '../errors.js';
import type { Config } from '../config.js';
import { issueInvoiceInTransaction } from './issue.js';
import { linkChargeAmount, lockChargeableLink } from './link-charge.js';

export interface CheckoutRequest {
  amount?: string;
  customerEmail: string;
  /** The payer's language (the page's): the invoice and receipt emails are written in it. */
  locale: string;
}

/** Whether a link's checkout could be paid through the fee proxy: a settlement address and a chain with proxy and fee address. */
export function linkPayableOnChain(chains: ChainRegistry, chainId: number, settlementAddress: string | null): boolean {
  const chain = chainById(chains, chainId);
  return settlementAddress !== null && !!chain?.feeProxy && !!chain.feeAddress;
}

/** The window the checkout limits count unpaid checkouts in. */
export const CHECKOUT_LIMIT_WINDOW_MS = 3_600_000;

/**
 * Makes the checkout in one transaction, under the link's row lock (as a simulated payment):
 * the link is active and below max_payments, the amount is one the link charges, the link and the
 * email are below their limits of unpaid checkouts, then the invoice (one line, the link's name)
 * is inserted, marked as a checkout with its expiry, and issued through the send path of any
 * invoice (code, payment reference) without the invoice email.
 */
export async function createLinkCheckout(
  pool: Pool,
  config: Pick<Config, 'checkouts' | 'chains'>,
  scope: Scope,
  linkId: string,
  req: CheckoutRequest,
): Promise<{ invoice: InvoiceRow }> {
  return withTransaction(pool, async (tx) => {
    const link = await lockChargeableLink(tx, scope, linkId);
    const amount = await linkChargeAmount(tx, scope, link, req.amount);
    if (!linkPayableOnChain(config.chains, link.chain_id, await findSettlementAddress(tx, scope))) {
      throw new DomainError('payment_link_not_payable', 'This payment link cannot be paid with a wallet yet: the merchant has no settlement address on its network.');
    }
    return { invoice: await insertCheckoutInvoice(tx, config, scope, link, amount, req, 'checkout') };
  });
}

/**
 * The invoice of a checkout of `link` (locked by the caller) for `amount`, in the caller's
 * transaction: the link and the email below their limits of unpaid checkouts, then the invoice
 * (one line, the link's name) inserted, marked as a checkout with its expiry, and issued (code,
 * payment reference) without the invoice email. A link's one-time checkout and a subscription
 * checkout's first period (subscription-checkout.ts) are both made here, so they count together.
 */
export async function insertCheckoutInvoice(
  tx: PoolClient,
  config: Pick<Config, 'checkouts' | 'chains'>,
  scope: Scope,
  link: PaymentLinkRow,
  amount: string,
  req: Omit<CheckoutRequest, 'amount'>,
  source: 'checkout' | 'subscription_checkout',
): Promise<InvoiceRow> {
  const recent = await countRecentCheckouts(tx, scope, link.id, req.customerEmail, new Date(Date.now() - CHECKOUT_LIMIT_WINDOW_MS));
  if (recent.link >= config.checkouts.limitPerLink) {
    throw new DomainError('checkout_limit_reached', 'This payment link has too many unpaid checkouts right now; try again later.');
  }
  if (recent.email >= config.checkouts.limitPerEmail) {
    throw new DomainError('checkout_limit_reached', 'This email address has too many unpaid checkouts right now; pay one of them or try again later.', 'customer_email');
  }
  const token = resolveToken(config.chains, scope.environment, link.network, link.currency);
  if (!token.ok) throw new DomainError('payment_link_not_payable', 'This payment link cannot be paid with a wallet: its token is not configured.');
  const account = await findAccount(tx, scope.accountId);
  const feeBps = account?.platform_fee_bps ?? 0;
  const atomic = toAtomic(new Money(amount), link.token_decimals);
  const customer = await upsertCustomer(tx, scope, req.customerEmail, null, null, null);
  const draft = await insertInvoice(tx, {
    id: newId('inv'),
    scope,
    customerId: customer.id,
    reference: newInvoiceReference(),
    amount,
    amountAtomic: atomic,
    feeAtomic: feeAtomic(atomic, feeBps),
    currency: link.currency,
    network: link.network,
    chainId: link.chain_id,
    tokenAddress: token.token.address,
    tokenDecimals: link.token_decimals,
    // Paid now or abandoned: no due date, nothing to remind of.
    remindersEnabled: false,
    // Marked for the merchant: made by an anonymous visitor of the link, voided if never paid.
    metadata: { payment_link_id: link.id, source },
    dueAt: null,
    memo: null,
    footer: null,
    taxId: null,
    customerLocale: customer.locale ?? req.locale,
    feeBps,
    paymentLinkId: link.id,
  });
  await replaceLines(tx, draft.id, [{ description: link.name, quantity: 1, unitAmount: amount }]);
  await markCheckout(tx, draft.id, config.checkouts.expiry.toMillis());
  return issueInvoiceInTransaction(tx, scope, draft.id);
}
