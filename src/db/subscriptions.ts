import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';

export interface SubscriptionRow {
  id: string;
  status: string;
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
}

const COLUMNS = `id, status, mode, amount::text as amount, amount_atomic::text as amount_atomic, currency, cadence,
  interval_seconds, network, chain_id, contract_address, onchain_id, platform_fee_bps, started_at,
  current_period_start, next_charge_at, ends_at`;

export async function findSubscription(db: Queryable, scope: Scope, id: string): Promise<SubscriptionRow | null> {
  const { rows } = await db.query<SubscriptionRow>(
    `select ${COLUMNS} from subscriptions where id = $1 and account_id = $2 and environment = $3`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

export interface NewSubscription {
  id: string;
  customerId: string;
  priceId: string;
  amount: string;
  amountAtomic: string;
  currency: string;
  cadence: string;
  intervalSeconds: number;
  network: string;
  chainId: number;
  contractAddress: string;
  onchainId: string;
  platformFeeBps: number;
}

/** Starts an active subscription: its first period begins now, the next charge one interval later. */
export async function insertSubscription(db: Queryable, scope: Scope, s: NewSubscription): Promise<SubscriptionRow> {
  const { rows } = await db.query<SubscriptionRow>(
    `insert into subscriptions (id, account_id, environment, customer_id, price_id, status, mode, amount, amount_atomic,
       currency, cadence, interval_seconds, network, chain_id, contract_address, onchain_id, platform_fee_bps,
       started_at, current_period_start, next_charge_at)
     values ($1, $2, $3, $4, $5, 'active', 'pull', $6::numeric, $7::numeric, $8, $9, $10::integer, $11, $12, $13, $14, $15,
       now(), now(), now() + make_interval(secs => $10::integer))
     returning ${COLUMNS}`,
    [
      s.id, scope.accountId, scope.environment, s.customerId, s.priceId, s.amount, s.amountAtomic, s.currency, s.cadence,
      s.intervalSeconds, s.network, s.chainId, s.contractAddress, s.onchainId, s.platformFeeBps,
    ],
  );
  return rows[0];
}
