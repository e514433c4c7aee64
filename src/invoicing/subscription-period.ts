// A subscription's period invoice (issue 26 "Every period"): made by the worker when period k
// begins, with its period_start, period_end and the subscription's amount, attempt_count 0,
// reminders off (dunning replaces them), issued at once (code, payment reference: the bytes8 the
// relayer's charge carries, paid to the subscription's payee) and emailed to nobody: the charge
// pays it, the receipt goes out then. Idempotent: the unique (subscription_id, period_index) makes
// one invoice per period whoever asks twice.
import { findPeriodInvoice, findPeriodInvoices, insertInvoices, replaceLinesOf, setInvoicePeriods, type InvoiceRow, type NewInvoice } from '../db/invoices.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { periodInvoiceContexts, type SubscriptionWork } from '../db/subscriptions.js';
import { newId, newInvoiceReference } from '../domain/ids.js';
import { feeAtomic } from '../domain/money.js';
import { periodEnd, periodStart } from '../domain/subscriptions.js';
import { issueDraftsInTransaction } from './issue.js';

/** Period k's invoice of the subscription: the one made before, or a new one issued now. */
export async function ensurePeriodInvoice(pool: Pool, sub: SubscriptionWork, k: number): Promise<InvoiceRow> {
  const existing = await findPeriodInvoice(pool, sub.id, k);
  if (existing) return existing;
  return withTransaction(pool, async (tx) => (await makePeriodInvoices(tx, [{ sub, k }]))[0]).catch(async (err: unknown) => {
    // Another worker made it first (the unique index): that one is the period's invoice.
    const made = await findPeriodInvoice(pool, sub.id, k);
    if (made) return made;
    throw err;
  });
}

/**
 * ensurePeriodInvoice for many subscriptions at once, by subscription id: those made before are
 * read in one query, the missing ones made in one transaction of a few statements whatever their
 * number (one commit, and each account's invoice counter taken once: a batch of charges falling
 * due together waits on neither). Should that transaction fail (another worker made one of them
 * meanwhile, or one cannot be made), each is made on its own as ensurePeriodInvoice does:
 * `failed` holds why one could not be.
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
    const made = await withTransaction(pool, (tx) => makePeriodInvoices(tx, missing));
    missing.forEach(({ sub }, i) => invoices.set(sub.id, made[i]));
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

/**
 * Makes and issues period k's invoice of each subscription, in the caller's transaction, in the
 * order given (the unique (subscription, period) refuses a second). Each a draft first, as every
 * invoice is made, then issued: the statements are the one-at-a-time ones over all of them.
 */
async function makePeriodInvoices(tx: PoolClient, periods: readonly { sub: SubscriptionWork; k: number }[]): Promise<InvoiceRow[]> {
  const contexts = await periodInvoiceContexts(
    tx,
    periods.map(({ sub }) => sub.id),
  );
  const drafts = periods.map(({ sub, k }) => {
    if (sub.token_address === null || sub.token_decimals === null || sub.payee_address === null) {
      throw new Error(`subscription ${sub.id} has no on-chain terms (token, payee): it cannot be billed`);
    }
    const context = contexts.get(sub.id);
    const clock = { startedAt: sub.started_at, intervalSeconds: sub.interval_seconds };
    // Made like the checkout's invoice of period 0 (src/invoicing/link-checkout.ts): the price's
    // amount and the fee the account's rate asked then (the subscription's platform_fee_bps).
    const invoice: NewInvoice = {
      id: newId('inv'),
      scope: { accountId: sub.account_id, environment: sub.environment },
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
    };
    return {
      invoice,
      payTo: sub.payee_address,
      line: { description: context?.productName ?? 'Subscription', quantity: 1, unitAmount: sub.amount },
      period: { invoiceId: invoice.id, subscriptionId: sub.id, periodIndex: k, start: periodStart(clock, k), end: periodEnd(clock, k) },
    };
  });
  await insertInvoices(
    tx,
    drafts.map((d) => d.invoice),
  );
  await replaceLinesOf(
    tx,
    drafts.map((d) => ({ invoiceId: d.invoice.id, lines: [d.line] })),
  );
  await setInvoicePeriods(
    tx,
    drafts.map((d) => d.period),
  );
  // Issued per account and environment (each has its own invoice numbers), in the order given.
  const byScope = new Map<string, typeof drafts>();
  for (const d of drafts) {
    const key = `${d.invoice.scope.accountId}/${d.invoice.scope.environment}`;
    const group = byScope.get(key);
    if (group) group.push(d);
    else byScope.set(key, [d]);
  }
  // The counters taken in one order (by account and environment), whatever order the batch came
  // in: two batches at once spanning the same counters would otherwise each hold one and wait for
  // the other's (a deadlock, one of them made again one invoice at a time).
  const issued = new Map<string, InvoiceRow>();
  for (const [, group] of [...byScope].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const rows = await issueDraftsInTransaction(
      tx,
      group[0].invoice.scope,
      group.map((d) => ({ id: d.invoice.id, payTo: d.payTo })),
    );
    for (const row of rows) issued.set(row.id, row);
  }
  return drafts.map((d) => {
    const row = issued.get(d.invoice.id);
    if (!row) throw new Error(`period invoice ${d.invoice.id} was not issued`);
    return row;
  });
}
