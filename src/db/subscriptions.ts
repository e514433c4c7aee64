// SQL of subscriptions: reading one or a page of them (the v1 API), and the merchant's cancel.
// Subscriptions are made only by the watcher (a confirmed Subscribed event matching a checkout).
import type { CanceledBy, SubscriptionStatus } from '../domain/subscription-statuses.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';
import type { Scope } from './scope.js';

export interface SubscriptionRow {
  id: string;
  status: SubscriptionStatus;
  mode: string;
  amount: string;
  amount_atomic: string;
  currency: string;
  cadence: string;
  interval_seconds: number | null;
  network: string;
  chain_id: number;
  contract_address: string;
  onchain_id: string;
  platform_fee_bps: number;
  started_at: Date;
  current_period_start: Date;
  next_charge_at: Date | null;
  ends_at: Date | null;
  // Beyond the spec's fields (docs/api.md "Subscriptions"):
  customer_id: string;
  customer_email: string;
  price_id: string;
  subscriber_address: string | null;
  canceled_at: Date | null;
  canceled_by: CanceledBy | null;
}

const COLUMNS = `s.id, s.status, s.mode, s.amount::text as amount, s.amount_atomic::text as amount_atomic, s.currency, s.cadence,
  s.interval_seconds, s.network, s.chain_id, s.contract_address, s.onchain_id, s.platform_fee_bps, s.started_at,
  s.current_period_start, s.next_charge_at, s.ends_at, s.customer_id,
  (select c.email from customers c where c.id = s.customer_id) as customer_email, s.price_id, s.subscriber_address,
  s.canceled_at, s.canceled_by`;

export async function findSubscription(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<SubscriptionRow | null> {
  const { rows } = await db.query<SubscriptionRow>(
    `select ${COLUMNS} from subscriptions s where s.id = $1 and s.account_id = $2 and s.environment = $3${forUpdate ? ' for update of s' : ''}`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

export interface SubscriptionFilters {
  status?: SubscriptionStatus;
  /** Case-insensitive. */
  customerEmail?: string;
}

/** One page of the scope's subscriptions, newest first. */
export async function listSubscriptions(db: Queryable, scope: Scope, filters: SubscriptionFilters, page: PageRequest): Promise<PageResult<SubscriptionRow>> {
  const conditions: string[] = [];
  const values: unknown[] = [];
  if (filters.status !== undefined) {
    values.push(filters.status);
    conditions.push(`s.status = $${4 + values.length}`);
  }
  if (filters.customerEmail !== undefined) {
    values.push(filters.customerEmail);
    conditions.push(
      `s.customer_id in (select c.id from customers c
         where c.account_id = $1 and c.environment = $2 and lower(c.email) = lower($${4 + values.length}))`,
    );
  }
  return listPage<SubscriptionRow>(db, scope, { table: 'subscriptions', alias: 's', select: `select ${COLUMNS} from subscriptions s`, filters: conditions, values }, page);
}


// --- the lifecycle (issue 26; jobs/subscriptions-charge.ts, jobs/subscriptions-cancel.ts) ---

/** What the worker needs of a subscription it claimed. `lease` is the next_work_at its claim wrote. */
export interface SubscriptionWork {
  id: string;
  account_id: string;
  environment: Scope['environment'];
  customer_id: string;
  price_id: string;
  status: 'active' | 'past_due' | 'canceled' | 'ended';
  amount: string;
  amount_atomic: string;
  currency: string;
  network: string;
  chain_id: number;
  contract_address: string;
  onchain_id: string;
  platform_fee_bps: number;
  interval_seconds: number;
  token_address: string | null;
  token_decimals: number | null;
  payee_address: string | null;
  operator_address: string | null;
  started_at: Date;
  next_charge_at: Date;
  ends_at: Date | null;
  canceled_by: 'customer' | 'merchant' | 'dunning' | null;
  cancel_sent_at: Date | null;
  lease: Date;
}

const WORK_COLUMNS = `s.id, s.account_id, s.environment, s.customer_id, s.price_id, s.status, s.amount::text as amount,
  s.amount_atomic::text as amount_atomic, s.currency, s.network, s.chain_id, s.contract_address, s.onchain_id,
  s.platform_fee_bps, s.interval_seconds, s.token_address, s.token_decimals, s.payee_address, s.operator_address, s.started_at,
  s.next_charge_at, s.ends_at, s.canceled_by, s.cancel_sent_at, s.next_work_at as lease`;

const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

// The lease is compared with what the claim returned, a JavaScript Date: it is written in whole
// milliseconds so the two are equal.

/**
 * Claims up to `limit` running subscriptions whose next_work_at has come (a period's first
 * attempt, a retry, a check of a sent charge, the end), oldest first, skipping rows another
 * worker holds, and leases them for `leaseMs`: their next_work_at moves to the lease's end, so
 * no other worker takes them until this one writes its outcome or the lease runs out.
 */
export async function claimChargeWork(db: Queryable, limit: number, leaseMs: number, aheadMs = 0): Promise<SubscriptionWork[]> {
  // `aheadMs`: an active subscription's next period falling due that soon is claimed already (its
  // first attempt only: the work is the due time itself, and the subscription does not end by
  // then), so that its invoice is made before it falls due; the caller charges it once it has.
  const { rows } = await db.query<SubscriptionWork>(
    `with due as (
       select id from subscriptions
       where next_work_at <= clock_timestamp() + make_interval(secs => $4::double precision / 1000)
         and (next_work_at <= clock_timestamp()
              or (status = 'active' and next_work_at = next_charge_at and (ends_at is null or ends_at > next_charge_at)))
         and status in ('active', 'past_due') and contract_address <> $3
         and interval_seconds > 0
       order by next_work_at
       limit $1
       for update skip locked
     )
     update subscriptions s set next_work_at = date_trunc('milliseconds', clock_timestamp() + make_interval(secs => $2::double precision / 1000))
     from due where s.id = due.id
     returning ${WORK_COLUMNS}`,
    [limit, leaseMs, ZERO_ADDRESS, aheadMs],
  );
  return rows;
}

/** Claims canceled subscriptions whose cancel (the merchant's, dunning's) the chain has not seen yet; leased as claimChargeWork. */
export async function claimCancelWork(db: Queryable, limit: number, leaseMs: number): Promise<SubscriptionWork[]> {
  const { rows } = await db.query<SubscriptionWork>(
    `with due as (
       select id from subscriptions
       where next_work_at <= clock_timestamp() and status = 'canceled' and onchain_canceled_at is null
         and canceled_by in ('merchant', 'dunning') and contract_address <> $3
       order by next_work_at
       limit $1
       for update skip locked
     )
     update subscriptions s set next_work_at = date_trunc('milliseconds', clock_timestamp() + make_interval(secs => $2::double precision / 1000))
     from due where s.id = due.id
     returning ${WORK_COLUMNS}`,
    [limit, leaseMs, ZERO_ADDRESS],
  );
  return rows;
}

/** Ends a claimed lease: the next look at `at` (null: none). False when the lease is no longer ours (a payment advanced the row). */
export async function releaseWork(db: Queryable, id: string, lease: Date, at: Date | null): Promise<boolean> {
  const { rowCount } = await db.query(`update subscriptions set next_work_at = $3 where id = $1 and next_work_at = $2`, [id, lease, at]);
  return rowCount === 1;
}

/**
 * releaseWork of many leases in one statement; those no longer ours are left as they are. The
 * watcher's transaction paying a range's invoices moves their subscriptions (the advance trigger)
 * one after the other: the statement takes only the rows no one holds (skip locked, it never
 * waits, so it cannot deadlock with it), and each of the others is released alone after.
 */
export async function releaseWorks(db: Queryable, leases: readonly { id: string; lease: Date; at: Date }[]): Promise<void> {
  if (leases.length === 0) return;
  const { rows } = await db.query<{ id: string }>(
    `with mine as (select id from subscriptions where id = any($1::text[]) for update skip locked),
     released as (
       update subscriptions s set next_work_at = r.at
       from unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) as r(id, lease, at)
       where s.id = r.id and s.id in (select id from mine) and s.next_work_at = r.lease
     )
     select id from mine`,
    [leases.map((l) => l.id), leases.map((l) => l.lease), leases.map((l) => l.at)],
  );
  const taken = new Set(rows.map((r) => r.id));
  for (const l of leases) if (!taken.has(l.id)) await releaseWork(db, l.id, l.lease, l.at);
}

/**
 * The last look before charges are sent, one statement for a batch: each subscription still under
 * this worker's lease and running, its period invoice still open (share-locked while the statement
 * runs). Those are leased afresh (next_work_at = `until`) and returned with their new lease; the
 * others are not to be charged. A merchant's cancel or void over the API that committed before it
 * is seen (the cancel also takes the lease away); one that comes after finds the charge on its way,
 * as if it had been sent.
 */
export async function confirmChargesToSend(db: Queryable, charges: readonly { id: string; lease: Date; invoiceId: string; until: Date }[]): Promise<Map<string, Date>> {
  if (charges.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; lease: Date }>(
    `with w as (select * from unnest($1::text[], $2::timestamptz[], $3::text[], $4::timestamptz[]) as w(id, lease, invoice_id, until)),
     open as (select i.id from invoices i where i.id in (select invoice_id from w) and i.status in ('open', 'overdue') for share)
     update subscriptions s set next_work_at = w.until
     from w
     where s.id = w.id and s.next_work_at = w.lease and s.status in ('active', 'past_due') and w.invoice_id in (select id from open)
     returning s.id, s.next_work_at as lease`,
    [charges.map((c) => c.id), charges.map((c) => c.lease), charges.map((c) => c.invoiceId), charges.map((c) => c.until)],
  );
  return new Map(rows.map((r) => [r.id, r.lease]));
}

/** ends_at has passed: a running subscription turns ended (its event by the trigger). False when the lease is gone. */
export async function markSubscriptionEnded(db: Queryable, id: string, lease: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `update subscriptions set status = 'ended', updated_at = clock_timestamp()
     where id = $1 and next_work_at = $2 and status in ('active', 'past_due')`,
    [id, lease],
  );
  return rowCount === 1;
}

/**
 * After a failed attempt, under the caller's lease and in the attempt's transaction: past_due,
 * then one of: the next attempt at `nextWorkAt`; canceled by dunning (the trigger plans the
 * on-chain cancel); or kept past_due with the failed period left behind (`nextChargeAt` moves to
 * the next period). False when the lease is gone: the caller rolls the attempt back.
 */
export async function recordSubscriptionAttemptFailed(
  db: Queryable,
  id: string,
  lease: Date,
  outcome: { kind: 'retry'; nextWorkAt: Date } | { kind: 'cancel' } | { kind: 'keep'; nextChargeAt: Date; nextWorkAt: Date },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update subscriptions set
       status = case when $3 = 'cancel' then 'canceled' else 'past_due' end,
       canceled_by = case when $3 = 'cancel' then 'dunning' else canceled_by end,
       next_charge_at = coalesce($4, next_charge_at),
       next_work_at = $5,
       updated_at = clock_timestamp()
     where id = $1 and next_work_at = $2 and status in ('active', 'past_due')`,
    [id, lease, outcome.kind, outcome.kind === 'keep' ? outcome.nextChargeAt : null, outcome.kind === 'cancel' ? null : outcome.nextWorkAt],
  );
  return rowCount === 1;
}

/** Period left behind (paid before it was linked, or voided by the merchant): the next period is billed from `nextChargeAt`. */
export async function skipPeriod(db: Queryable, id: string, lease: Date, nextChargeAt: Date, nextWorkAt: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `update subscriptions set next_charge_at = greatest(next_charge_at, $3), next_work_at = $4, updated_at = clock_timestamp()
     where id = $1 and next_work_at = $2 and status in ('active', 'past_due')`,
    [id, lease, nextChargeAt, nextWorkAt],
  );
  return rowCount === 1;
}

/** The relayer sent the on-chain cancel; look again at `recheckAt` (the watcher's Canceled log sets onchain_canceled_at). */
export async function recordCancelSent(db: Queryable, id: string, lease: Date, txHash: string, recheckAt: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `update subscriptions set cancel_tx_hash = $3, cancel_sent_at = clock_timestamp(), next_work_at = $4
     where id = $1 and next_work_at = $2`,
    [id, lease, txHash, recheckAt],
  );
  return rowCount === 1;
}

export type CancelOutcome =
  | { outcome: 'canceled'; subscription: SubscriptionRow }
  | { outcome: 'not_found' }
  | { outcome: 'not_active'; subscription: SubscriptionRow };

/**
 * Cancels a running subscription of the scope, in the caller's transaction: status canceled,
 * canceled_by `by`, canceled_at now. Its triggers write subscription.canceled, stop the dunning of
 * its open period invoices and, for 'merchant' and 'dunning', plan the relayer's on-chain cancel
 * (jobs/subscriptions-cancel.ts), so the contract refuses every later charge. 'not_active': it was
 * already canceled or ended (409 subscription_not_active).
 */
export async function cancelSubscription(
  tx: Queryable,
  scope: Scope,
  id: string,
  by: 'merchant' | 'dunning' | 'customer',
): Promise<CancelOutcome> {
  const { rows } = await tx.query<SubscriptionRow>(
    `update subscriptions s set status = 'canceled', canceled_by = $4, canceled_at = clock_timestamp(), updated_at = clock_timestamp()
     where s.id = $1 and s.account_id = $2 and s.environment = $3 and s.status in ('active', 'past_due')
     returning ${COLUMNS}`,
    [id, scope.accountId, scope.environment, by],
  );
  if (rows[0]) return { outcome: 'canceled', subscription: rows[0] };
  const existing = await findSubscription(tx, scope, id);
  return existing ? { outcome: 'not_active', subscription: existing } : { outcome: 'not_found' };
}

/** What a period invoice of each subscription says besides its terms: the product's name and the customer's locale (or the last period invoice's). */
export async function periodInvoiceContexts(db: Queryable, subscriptionIds: readonly string[]): Promise<Map<string, { productName: string; locale: string | null }>> {
  if (subscriptionIds.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; productName: string; locale: string | null }>(
    `select s.id, p.name as "productName",
       coalesce(c.locale, (select i.customer_locale from invoices i where i.subscription_id = s.id order by i.period_index desc nulls last limit 1)) as locale
     from subscriptions s join prices pr on pr.id = s.price_id join products p on p.id = pr.product_id join customers c on c.id = s.customer_id
     where s.id = any($1::text[])`,
    [subscriptionIds],
  );
  return new Map(rows.map(({ id, ...context }) => [id, context]));
}
