// A payment link's checkout (POST /pay/<link id>/checkout): an invoice of the link for one payment,
// made and sent at once, then paid on-chain by the payer's wallet exactly as any invoice. It counts
// as one of the link's payments once a confirmed payment applied to it (payment_link_payment_count).
import { findAccount, findSettlementAddress } from '../db/accounts.js';
import { upsertCustomer } from '../db/customers.js';
import { insertInvoice, replaceLines, type InvoiceRow, type Scope } from '../db/invoices.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { chainById } from '../domain/chains.js';
import { newId, newInvoiceReference } from '../domain/ids.js';
import { feeAtomic, Money, toAtomic } from '../domain/money.js';
import { resolveToken } from '../domain/tokens.js';
import { ApiError } from '../errors.js';
import type { OutboxJob } from '../queue/outbox.js';
import { sendInvoiceInTransaction } from './invoice-send.js';
import { linkChargeAmount, lockChargeableLink } from './link-charge.js';

export interface CheckoutRequest {
  amount?: string;
  customerEmail: string;
  /** The payer's language (the page's): the invoice and receipt emails are written in it. */
  locale: string;
}

/** Whether a link's checkout could be paid through the fee proxy: a settlement address and a chain with proxy and fee address. */
export function linkPayableOnChain(chainId: number, settlementAddress: string | null): boolean {
  const chain = chainById(chainId);
  return settlementAddress !== null && !!chain?.feeProxy && !!chain.feeAddress;
}

/**
 * Makes the checkout in one transaction, under the link's row lock (as a simulated payment):
 * the link is active and below max_payments, the amount is one the link charges, then the invoice
 * (one line, the link's name) is inserted and sent through the send path of any invoice (code,
 * payment reference, the invoice email). Publish the returned job after commit.
 */
export async function createLinkCheckout(
  pool: Pool,
  config: { mailFrom: string },
  scope: Scope,
  linkId: string,
  req: CheckoutRequest,
): Promise<{ invoice: InvoiceRow; job: OutboxJob<'invoice.send'> }> {
  return withTransaction(pool, async (tx) => {
    const link = await lockChargeableLink(tx, scope, linkId);
    const amount = await linkChargeAmount(tx, scope, link, req.amount);
    if (!linkPayableOnChain(link.chain_id, await findSettlementAddress(tx, scope))) {
      throw new ApiError('payment_link_not_payable', 'This payment link cannot be paid with a wallet yet: the merchant has no settlement address on its network.');
    }
    const token = resolveToken(scope.environment, link.network, link.currency);
    if (!token.ok) throw new ApiError('payment_link_not_payable', 'This payment link cannot be paid with a wallet: its token is not configured.');
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
      metadata: { payment_link_id: link.id },
      dueAt: null,
      memo: null,
      footer: null,
      taxId: null,
      customerLocale: customer.locale ?? req.locale,
      feeBps,
      paymentLinkId: link.id,
    });
    await replaceLines(tx, draft.id, [{ description: link.name, quantity: 1, unitAmount: amount }]);
    const { row, job } = await sendInvoiceInTransaction(tx, scope, draft.id, config.mailFrom);
    return { invoice: row, job };
  });
}
