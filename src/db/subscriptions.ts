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

/**
 * The merchant's cancel, in the caller's transaction: active or past_due -> canceled (by the
 * merchant, now). Returns null when the row was not in a cancelable status (the caller holds its
 * row lock, so that is what it read). The on-chain cancel follows from the status change (the
 * relayer sends it for every canceled subscription not yet canceled on-chain).
 */
export async function markSubscriptionCanceledByMerchant(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `update subscriptions set status = 'canceled', canceled_by = 'merchant', canceled_at = clock_timestamp(), updated_at = clock_timestamp()
     where id = $1 and status in ('active', 'past_due')`,
    [id],
  );
  return rowCount === 1;
}
