// SQL of the invoices family: invoices, their line items and the per-account number counters.
import type { Environment } from '../domain/environment.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { CREDENTIAL_SELECT, type CredentialColumns } from './credential-columns.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';
import type { Scope } from './scope.js';

export type { Scope } from './scope.js';

export interface InvoiceRow {
  id: string;
  account_id: string;
  environment: Environment;
  customer_id: string;
  code: string | null;
  reference: string;
  status: InvoiceStatus;
  amount: string | null;
  amount_atomic: string | null;
  fee_atomic: string | null;
  currency: string;
  network: string;
  chain_id: number;
  token_address: string;
  token_decimals: number;
  period_start: Date | null;
  period_end: Date | null;
  attempt_count: number;
  next_attempt_at: Date | null;
  paid_at: Date | null;
  sent_at: Date | null;
  reminders_enabled: boolean;
  last_reminder_at: Date | null;
  failure_code: string | null;
  failure_message: string | null;
  metadata: Record<string, string>;
  due_at: Date | null;
  memo: string | null;
  footer: string | null;
  tax_id: string | null;
  /** Input-only, like memo: the language of the invoice's documents. */
  customer_locale: string;
  voided_at: Date | null;
  /** Fixed at send: where this invoice is paid, and the reference its proxy payments carry. */
  settlement_address: string | null;
  payment_reference: string | null;
  /** The account's fee rate when the invoice was made. */
  fee_bps: number | null;
  /** What applied on-chain payments add up to (integer string). */
  amount_paid_atomic: string;
  /** What of fee_atomic those payments counted (integer string); null in an event's snapshot from before it was stored. */
  fee_counted_atomic: string | null;
  /** A subscription's period invoice: when the relayer last sent its charge (null: never). */
  charge_sent_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface LineRow {
  position: number;
  description: string;
  quantity: number;
  unit_amount: string;
}

// amount columns are unconstrained numeric; ::text keeps their exact digits.
const COLUMNS = `id, account_id, environment, customer_id, code, reference, status,
  amount::text as amount, amount_atomic::text as amount_atomic, fee_atomic::text as fee_atomic,
  currency, network, chain_id, token_address, token_decimals, period_start, period_end,
  attempt_count, next_attempt_at, paid_at, sent_at, reminders_enabled, last_reminder_at,
  failure_code, failure_message, metadata, due_at, memo, footer, tax_id, customer_locale, voided_at,
  settlement_address, payment_reference, fee_bps, amount_paid_atomic::text as amount_paid_atomic, fee_counted_atomic::text as fee_counted_atomic, charge_sent_at, created_at, updated_at`;

/**
 * The invoice and the presented key's credential in one statement, for the hot GET: the key is
 * checked on every request without a second round trip. No credential row: unknown key.
 */
export async function findInvoiceWithCredential(
  db: Queryable,
  keyHash: Buffer,
  id: string,
): Promise<(CredentialColumns & { invoice: InvoiceRow | null }) | null> {
  const { rows } = await db.query<CredentialColumns & InvoiceRow>({
    // Named (prepared once per connection): this is the hottest statement of the API.
    name: 'invoice-with-credential',
    text: `select ${CREDENTIAL_SELECT}, ${QUALIFIED_COLUMNS}
     from credentials c join accounts a on a.id = c.account_id
     left join invoices i on i.id = $2 and i.account_id = c.account_id and i.environment = c.environment
     where c.secret_hash = $1`,
    values: [keyHash, id],
  });
  const row = rows[0];
  if (!row) return null;
  return { ...row, invoice: row.id === null ? null : row };
}

/** The invoice select list over a relation aliased `i` (also used to read invoice snapshots of events). */
export const QUALIFIED_COLUMNS = COLUMNS.split(',').map((c) => `i.${c.trim()}`).join(', ');

export async function findInvoice(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<InvoiceRow | null> {
  const { rows } = await db.query<InvoiceRow>({
    name: forUpdate ? 'find-invoice-for-update' : 'find-invoice',
    text: `select ${COLUMNS} from invoices where id = $1 and account_id = $2 and environment = $3 ${forUpdate ? 'for update' : ''}`,
    values: [id, scope.accountId, scope.environment],
  });
  return rows[0] ?? null;
}

/**
 * The invoice `npm run pay` names, across accounts (a local development tool): by its id, its page
 * reference, or its payment reference (stored in lower case).
 */
export async function findInvoiceByAnyReference(db: Queryable, handle: string): Promise<InvoiceRow | null> {
  const { rows } = await db.query<InvoiceRow>(
    `select ${COLUMNS} from invoices where id = $1 or reference = $1 or payment_reference = lower($1) limit 1`,
    [handle],
  );
  return rows[0] ?? null;
}

export async function findLines(db: Queryable, invoiceId: string): Promise<LineRow[]> {
  const { rows } = await db.query<LineRow>(
    'select position, description, quantity, unit_amount::text as unit_amount from invoice_line_items where invoice_id = $1 order by position',
    [invoiceId],
  );
  return rows;
}

export interface NewInvoice {
  id: string;
  scope: Scope;
  customerId: string;
  reference: string;
  amount: string | null;
  amountAtomic: string | null;
  feeAtomic: string | null;
  currency: string;
  network: string;
  chainId: number;
  tokenAddress: string;
  tokenDecimals: number;
  remindersEnabled: boolean;
  metadata: Record<string, string>;
  dueAt: string | null;
  memo: string | null;
  footer: string | null;
  taxId: string | null;
  customerLocale: string;
  feeBps: number;
  /** A payment link's checkout: the link it pays (null for any other invoice). */
  paymentLinkId?: string | null;
}

export async function insertInvoice(db: Queryable, inv: NewInvoice): Promise<InvoiceRow> {
  return (await insertInvoices(db, [inv]))[0];
}

/** Inserts drafts in one statement, returned in the order given. */
export async function insertInvoices(db: Queryable, invs: readonly NewInvoice[]): Promise<InvoiceRow[]> {
  if (invs.length === 0) return [];
  const col = <T>(f: (inv: NewInvoice) => T): T[] => invs.map(f);
  const { rows } = await db.query<InvoiceRow>(
    `insert into invoices (id, account_id, environment, customer_id, reference, amount, amount_atomic, fee_atomic,
       currency, network, chain_id, token_address, token_decimals, reminders_enabled, metadata, due_at, memo, footer, tax_id,
       customer_locale, fee_bps, payment_link_id)
     select t.id, t.account_id, t.environment::environment, t.customer_id, t.reference, t.amount, t.amount_atomic, t.fee_atomic,
       t.currency, t.network, t.chain_id, t.token_address, t.token_decimals, t.reminders_enabled, t.metadata, t.due_at, t.memo, t.footer, t.tax_id,
       t.customer_locale, t.fee_bps, t.payment_link_id
     from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::numeric[], $8::numeric[], $9::text[], $10::text[],
       $11::int[], $12::text[], $13::int[], $14::boolean[], $15::jsonb[], $16::timestamptz[], $17::text[], $18::text[], $19::text[], $20::text[],
       $21::int[], $22::text[])
       as t(id, account_id, environment, customer_id, reference, amount, amount_atomic, fee_atomic, currency, network, chain_id, token_address,
         token_decimals, reminders_enabled, metadata, due_at, memo, footer, tax_id, customer_locale, fee_bps, payment_link_id)
     returning ${COLUMNS}`,
    [
      col((i) => i.id), col((i) => i.scope.accountId), col((i) => i.scope.environment), col((i) => i.customerId), col((i) => i.reference),
      col((i) => i.amount), col((i) => i.amountAtomic), col((i) => i.feeAtomic), col((i) => i.currency), col((i) => i.network),
      col((i) => i.chainId), col((i) => i.tokenAddress), col((i) => i.tokenDecimals), col((i) => i.remindersEnabled),
      col((i) => JSON.stringify(i.metadata)), col((i) => i.dueAt), col((i) => i.memo), col((i) => i.footer), col((i) => i.taxId),
      col((i) => i.customerLocale), col((i) => i.feeBps), col((i) => i.paymentLinkId ?? null),
    ],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return invs.map((i) => byId.get(i.id)!);
}

/** Replaces every line of an invoice with the given ones, in order. */
export async function replaceLines(
  db: Queryable,
  invoiceId: string,
  lines: { description: string; quantity: number; unitAmount: string }[],
): Promise<void> {
  await replaceLinesOf(db, [{ invoiceId, lines }]);
}

/** replaceLines of many invoices: one delete, one insert. */
export async function replaceLinesOf(
  db: Queryable,
  invoices: readonly { invoiceId: string; lines: readonly { description: string; quantity: number; unitAmount: string }[] }[],
): Promise<void> {
  if (invoices.length === 0) return;
  await db.query('delete from invoice_line_items where invoice_id = any($1::text[])', [invoices.map((i) => i.invoiceId)]);
  const flat = invoices.flatMap(({ invoiceId, lines }) => lines.map((l, i) => ({ invoiceId, position: i + 1, ...l })));
  if (flat.length === 0) return;
  await db.query(
    `insert into invoice_line_items (invoice_id, position, description, quantity, unit_amount)
     select i, p, d, q, u::numeric
     from unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[]) as t(i, p, d, q, u)`,
    [flat.map((l) => l.invoiceId), flat.map((l) => l.position), flat.map((l) => l.description), flat.map((l) => l.quantity), flat.map((l) => l.unitAmount)],
  );
}

export interface DraftEdit {
  amount?: { amount: string | null; amountAtomic: string | null; feeAtomic: string | null };
  dueAt?: string;
  memo?: string;
  footer?: string;
  taxId?: string;
  customerLocale?: string;
}

/**
 * Applies an edit to a draft. The caller holds the row lock and has checked the status.
 * clock_timestamp(): the edit happens now, after any wait for the lock, not when the transaction began.
 */
export async function updateDraft(db: Queryable, id: string, edit: DraftEdit): Promise<InvoiceRow> {
  const { rows } = await db.query<InvoiceRow>(
    `update invoices set
       amount = case when $2 then $3::numeric else amount end,
       amount_atomic = case when $2 then $4::numeric else amount_atomic end,
       fee_atomic = case when $2 then $5::numeric else fee_atomic end,
       due_at = coalesce($6::timestamptz, due_at),
       memo = coalesce($7, memo),
       footer = coalesce($8, footer),
       tax_id = coalesce($9, tax_id),
       customer_locale = coalesce($10, customer_locale),
       updated_at = clock_timestamp()
     where id = $1 and status = 'draft'
     returning ${COLUMNS}`,
    [
      id, edit.amount !== undefined, edit.amount?.amount ?? null, edit.amount?.amountAtomic ?? null, edit.amount?.feeAtomic ?? null,
      edit.dueAt ?? null, edit.memo ?? null, edit.footer ?? null, edit.taxId ?? null, edit.customerLocale ?? null,
    ],
  );
  return rows[0];
}

/** Takes the next invoice number of the account's environment (row-locked until commit). */
export async function nextInvoiceNumber(db: Queryable, scope: Scope): Promise<number> {
  return nextInvoiceNumbers(db, scope, 1);
}

/** Takes `count` consecutive invoice numbers of the account and environment at once: returns the first. */
export async function nextInvoiceNumbers(db: Queryable, scope: Scope, count: number): Promise<number> {
  const { rows } = await db.query<{ last_number: number }>(
    `insert into invoice_counters (account_id, environment, last_number) values ($1, $2, $3)
     on conflict (account_id, environment) do update set last_number = invoice_counters.last_number + $3
     returning last_number`,
    [scope.accountId, scope.environment, count],
  );
  return rows[0].last_number - count + 1;
}

/** Where and how a sent invoice is paid on-chain, fixed at send (null: no settlement address yet). */
export interface PaymentTarget {
  settlementAddress: string;
  salt: string;
  reference: string;
  referenceTopic: string;
}

/** draft -> open. Conditional on the status, so two racing sends cannot both win. */
export async function markSent(db: Queryable, id: string, code: string, target: PaymentTarget | null = null): Promise<InvoiceRow | null> {
  return (await markSentMany(db, [{ id, code, target }]))[0] ?? null;
}

/** markSent of many drafts in one statement: the rows it issued (those still drafts), in the order given. */
export async function markSentMany(db: Queryable, sends: readonly { id: string; code: string; target: PaymentTarget | null }[]): Promise<InvoiceRow[]> {
  if (sends.length === 0) return [];
  // clock_timestamp(), not now(): now() is when the transaction began, possibly before it waited
  // for the row lock behind an edit; sent_at must come after that edit's updated_at.
  const { rows } = await db.query<InvoiceRow>(
    `update invoices set status = 'open', code = s.new_code, sent_at = c.t, updated_at = c.t,
       settlement_address = s.new_settlement_address, reference_salt = s.new_salt, payment_reference = s.new_reference,
       payment_reference_topic = s.new_topic
     from (select clock_timestamp() as t) c,
       unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
         as s(draft_id, new_code, new_settlement_address, new_salt, new_reference, new_topic)
     where invoices.id = s.draft_id and invoices.status = 'draft' returning ${COLUMNS}`,
    [
      sends.map((x) => x.id), sends.map((x) => x.code), sends.map((x) => x.target?.settlementAddress ?? null), sends.map((x) => x.target?.salt ?? null),
      sends.map((x) => x.target?.reference ?? null), sends.map((x) => x.target?.referenceTopic ?? null),
    ],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return sends.flatMap((x) => byId.get(x.id) ?? []);
}

export async function setRemindersEnabled(db: Queryable, id: string, enabled: boolean): Promise<InvoiceRow> {
  const { rows } = await db.query<InvoiceRow>(
    `update invoices set reminders_enabled = $2,
       reminders_resumed_at = case when $2 and not reminders_enabled then clock_timestamp() else reminders_resumed_at end,
       updated_at = case when reminders_enabled = $2 then updated_at else clock_timestamp() end
     where id = $1 returning ${COLUMNS}`,
    [id, enabled],
  );
  return rows[0];
}

/** open|overdue -> void. Conditional on the status, so it cannot race a payment. */
export async function markVoid(db: Queryable, id: string): Promise<InvoiceRow | null> {
  const { rows } = await db.query<InvoiceRow>(
    `update invoices set status = 'void', voided_at = clock_timestamp(), updated_at = clock_timestamp()
     where id = $1 and status in ('open', 'overdue')
     returning ${COLUMNS}`,
    [id],
  );
  return rows[0] ?? null;
}

/** Deletes a draft with its lines (cascade). A draft holds no number, so numbering stays gap-free. */
export async function deleteDraft(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(`delete from invoices where id = $1 and status = 'draft'`, [id]);
  return rowCount === 1;
}

export interface InvoiceFilters {
  status?: InvoiceStatus;
  /** Matched case-insensitively, as customers are. */
  customerEmail?: string;
  /** The invoices of one subscription (its periods'). */
  subscriptionId?: string;
}

/** A page of the scope's invoices, newest first (see page.ts). */
export async function listInvoices(db: Queryable, scope: Scope, filters: InvoiceFilters, page: PageRequest): Promise<PageResult<InvoiceRow>> {
  const conditions: string[] = [];
  const values: unknown[] = [];
  if (filters.status !== undefined) {
    values.push(filters.status);
    conditions.push(`i.status = $${4 + values.length}::invoice_status`);
  }
  if (filters.customerEmail !== undefined) {
    values.push(filters.customerEmail);
    conditions.push(
      `i.customer_id in (select c.id from customers c
         where c.account_id = $1 and c.environment = $2 and lower(c.email) = lower($${4 + values.length}))`,
    );
  }
  // A subscription's invoices are a list of their own: its cursor must be one of them too.
  const member = filters.subscriptionId === undefined ? {} : { member: { column: 'subscription_id' as const, value: filters.subscriptionId } };
  return listPage<InvoiceRow>(db, scope, { table: 'invoices', alias: 'i', select: `select ${QUALIFIED_COLUMNS} from invoices i`, filters: conditions, values, ...member }, page);
}

/**
 * Under a share lock held until the caller's commit: false when the invoice was voided. A void
 * committing meanwhile waits for the caller (the invoice email being handed to SMTP).
 */
export async function lockIfNotVoid(db: Queryable, invoiceId: string): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>(`select status <> 'void' as ok from invoices where id = $1 for share`, [invoiceId]);
  return rows[0]?.ok === true;
}

// --- period invoices of subscriptions (issue 26; jobs/subscriptions-charge.ts) ---

/** Period k's invoice of a subscription, if made. */
export async function findPeriodInvoice(db: Queryable, subscriptionId: string, periodIndex: number): Promise<InvoiceRow | null> {
  const { rows } = await db.query<InvoiceRow>(
    `select ${COLUMNS} from invoices where subscription_id = $1 and period_index = $2`,
    [subscriptionId, periodIndex],
  );
  return rows[0] ?? null;
}

/** The period invoices of many subscriptions at once, by subscription id: `pairs` are (subscription, period index). */
export async function findPeriodInvoices(db: Queryable, pairs: readonly { subscriptionId: string; periodIndex: number }[]): Promise<Map<string, InvoiceRow>> {
  if (pairs.length === 0) return new Map();
  const { rows } = await db.query<InvoiceRow & { period_of: string }>(
    `select ${COLUMNS}, subscription_id as period_of from invoices
     where (subscription_id, period_index) in (select * from unnest($1::text[], $2::int[]))`,
    [pairs.map((p) => p.subscriptionId), pairs.map((p) => p.periodIndex)],
  );
  return new Map(rows.map(({ period_of, ...row }) => [period_of, row]));
}

/** Makes a fresh draft period k of its subscription (the unique (subscription_id, period_index) refuses a second). */
export async function setInvoicePeriod(db: Queryable, invoiceId: string, p: { subscriptionId: string; periodIndex: number; start: Date; end: Date }): Promise<void> {
  await setInvoicePeriods(db, [{ invoiceId, ...p }]);
}

/** setInvoicePeriod of many drafts in one statement. */
export async function setInvoicePeriods(db: Queryable, ps: readonly { invoiceId: string; subscriptionId: string; periodIndex: number; start: Date; end: Date }[]): Promise<void> {
  if (ps.length === 0) return;
  await db.query(
    `update invoices i set subscription_id = p.subscription_id, period_index = p.period_index, period_start = p.period_start, period_end = p.period_end
     from unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[]) as p(id, subscription_id, period_index, period_start, period_end)
     where i.id = p.id and i.status = 'draft'`,
    [ps.map((p) => p.invoiceId), ps.map((p) => p.subscriptionId), ps.map((p) => p.periodIndex), ps.map((p) => p.start), ps.map((p) => p.end)],
  );
}

/** The relayer sent a charge for this open period invoice (the watcher's Charged log pays it). */
export async function recordChargeSent(db: Queryable, invoiceId: string, txHash: string): Promise<void> {
  await recordChargesSent(db, [{ invoiceId, txHash }]);
}

/**
 * recordChargeSent of many invoices in one statement. The watcher pays a range's invoices in one
 * transaction, in log order: one statement waiting for a row it holds while holding rows it then
 * asks for would deadlock with it. So the statement takes only the rows no one holds (skip
 * locked, it never waits), and each of the others is written alone after (waiting, it holds nothing else).
 */
export async function recordChargesSent(db: Queryable, sent: readonly { invoiceId: string; txHash: string }[]): Promise<void> {
  if (sent.length === 0) return;
  const { rows } = await db.query<{ id: string }>(
    `with mine as (select id from invoices where id = any($1::text[]) for update skip locked),
     recorded as (
       update invoices i set charge_tx_hash = s.tx_hash, charge_sent_at = clock_timestamp(), updated_at = clock_timestamp()
       from unnest($1::text[], $2::text[]) as s(id, tx_hash)
       where i.id = s.id and i.id in (select id from mine) and i.status in ('open', 'overdue')
     )
     select id from mine`,
    [sent.map((x) => x.invoiceId), sent.map((x) => x.txHash)],
  );
  const taken = new Set(rows.map((r) => r.id));
  for (const x of sent) {
    if (taken.has(x.invoiceId)) continue;
    await db.query(
      `update invoices set charge_tx_hash = $2, charge_sent_at = clock_timestamp(), updated_at = clock_timestamp()
       where id = $1 and status in ('open', 'overdue')`,
      [x.invoiceId, x.txHash],
    );
  }
}

/**
 * Counts a failed attempt on an open period invoice (attempt_count + 1, why, when the next one
 * happens, null after the last) and writes invoice.payment_failed with the invoice as it now
 * stands, in the caller's transaction. Null when the invoice is no longer open (paid meanwhile).
 */
export async function recordFailedAttempt(
  db: Queryable,
  invoiceId: string,
  f: { code: string; message: string; nextAttemptAt: Date | null },
): Promise<InvoiceRow | null> {
  const { rows } = await db.query<InvoiceRow>(
    `update invoices set attempt_count = attempt_count + 1, failure_code = $2, failure_message = $3, next_attempt_at = $4,
       updated_at = clock_timestamp()
     where id = $1 and status in ('open', 'overdue')
     returning ${COLUMNS}`,
    [invoiceId, f.code, f.message, f.nextAttemptAt],
  );
  if (!rows[0]) return null;
  await db.query(`select emit_invoice_event($1, 'invoice.payment_failed')`, [invoiceId]);
  return rows[0];
}
