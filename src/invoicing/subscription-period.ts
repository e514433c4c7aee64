// A subscription's period invoice (issue 26 "Every period"): made by the worker when period k
// begins, with its period_start, period_end and the subscription's amount, attempt_count 0,
// reminders off (dunning replaces them), issued at once (code, payment reference: the bytes8 the
// relayer's charge carries, paid to the subscription's payee) and emailed to nobody: the charge
// pays it, the receipt goes out then. Idempotent: the unique (subscription_id, period_index) makes
// one invoice per period whoever asks twice.
import { findPeriodInvoice, findPeriodInvoices, insertInvoice, replaceLines, setInvoicePeriod, type InvoiceRow } from '../db/invoices.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { periodInvoiceContext, type SubscriptionWork } from '../db/subscriptions.js';
import { newId, newInvoiceReference } from '../domain/ids.js';
import { feeAtomic } from '../domain/money.js';
import { periodEnd, periodStart } from '../domain/subscriptions.js';
import { issueInvoiceInTransaction } from './issue.js';

/** Period k's invoice of the subscription: the one made before, or a new one issued now. */
export async function ensurePeriodInvoice(pool: Pool, sub: SubscriptionWork, k: number): Promise<InvoiceRow> {
  const existing = await findPeriodInvoice(pool, sub.id, k);
  if (existing) return existing;
  return withTransaction(pool, (tx) => makePeriodInvoice(tx, sub, k)).catch(async (err: unknown) => {
    // Another worker made it first (the unique index): that one is the period's invoice.
    const made = await findPeriodInvoice(pool, sub.id, k);
    if (made) return made;
    throw err;
  });
}

/**
 * ensurePeriodInvoice for many subscriptions at once, by subscription id: those made before are
 * read in one query, the missing ones made in one transaction (one commit, and the account's
 * invoice counter taken once, rather than per invoice: a batch of charges falling due together
 * waits on neither). Should that transaction fail (another worker made one of them meanwhile, or
 * one cannot be made), each is made on its own as ensurePeriodInvoice does: `failed` holds why
 * one could not be.
 */
export async function ensurePeriodInvoices(
  pool: Pool,
  periods: readonly { sub: SubscriptionWork; k: number }[],
): Promise<{ invoices: Map<string, InvoiceRow>; failed: Map<string, unknown> }> {
  const invoices = await findPeriodInvoices(
    pool,
    periods.map(({ sub, k }) => ({ subscriptionId: sub.id, periodIndex: k })),
  );
  const failed = new Map<string, unknown>();
  const missing = periods.filter(({ sub }) => !invoices.has(sub.id));
  if (missing.length === 0) return { invoices, failed };
  try {
    const made = await withTransaction(pool, async (tx) => {
      const rows: [string, InvoiceRow][] = [];
      for (const { sub, k } of missing) rows.push([sub.id, await makePeriodInvoice(tx, sub, k)]);
      return rows;
    });
    for (const [id, row] of made) invoices.set(id, row);
  } catch {
    for (const { sub, k } of missing) {
      await ensurePeriodInvoice(pool, sub, k).then(
        (row) => invoices.set(sub.id, row),
        (err: unknown) => failed.set(sub.id, err),
      );
    }
  }
  return { invoices, failed };
}

/** Makes and issues period k's invoice, in the caller's transaction (the unique (subscription, period) refuses a second). */
async function makePeriodInvoice(tx: PoolClient, sub: SubscriptionWork, k: number): Promise<InvoiceRow> {
  if (sub.token_address === null || sub.token_decimals === null || sub.payee_address === null) {
    throw new Error(`subscription ${sub.id} has no on-chain terms (token, payee): it cannot be billed`);
  }
  const scope = { accountId: sub.account_id, environment: sub.environment };
  const clock = { startedAt: sub.started_at, intervalSeconds: sub.interval_seconds };
  const start = periodStart(clock, k);
  const end = periodEnd(clock, k);
  const context = await periodInvoiceContext(tx, sub.id);
  // Made like the checkout's invoice of period 0 (src/invoicing/link-checkout.ts): the price's
  // amount and the fee the account's rate asked then (the subscription's platform_fee_bps).
  const draft = await insertInvoice(tx, {
    id: newId('inv'),
    scope,
    customerId: sub.customer_id,
    reference: newInvoiceReference(),
    amount: sub.amount,
    amountAtomic: sub.amount_atomic,
    feeAtomic: feeAtomic(sub.amount_atomic, sub.platform_fee_bps),
    currency: sub.currency,
    network: sub.network,
    chainId: sub.chain_id,
    tokenAddress: sub.token_address,
    tokenDecimals: sub.token_decimals,
    remindersEnabled: false,
    metadata: { subscription_id: sub.id, source: 'subscription' },
    dueAt: null,
    memo: null,
    footer: null,
    taxId: null,
    customerLocale: context?.locale ?? 'en',
    feeBps: sub.platform_fee_bps,
  });
  await replaceLines(tx, draft.id, [{ description: context?.productName ?? 'Subscription', quantity: 1, unitAmount: sub.amount }]);
  await setInvoicePeriod(tx, draft.id, { subscriptionId: sub.id, periodIndex: k, start, end });
  return issueInvoiceInTransaction(tx, scope, draft.id, sub.payee_address);
}
