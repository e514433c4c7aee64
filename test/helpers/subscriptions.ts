// Subscriptions seeded as the watcher makes them (/work/coord/subscriptions-interface.md): every
// chain field filled, started_at the subscribe block's time, next_charge_at one interval later.
// Until the watcher's Subscribed kind makes them from a real log, the lifecycle tests insert them
// so (with a real on-chain subscribe behind them where a chain is involved).
import type { Pool } from '../../src/db/pool.js';
import { newId } from '../../src/domain/ids.js';

export interface SeedSubscription {
  accountId: string;
  environment?: 'sandbox' | 'live';
  priceId: string;
  customerId: string;
  chainId?: number;
  network?: string;
  contract: string;
  onchainId: string;
  subscriber: string;
  payee: string;
  token: string;
  tokenDecimals?: number;
  feeAddress: string;
  operator: string;
  amount: string;
  amountAtomic: string;
  feeBps?: number;
  intervalSeconds: number;
  startedAt: Date;
  endsAt?: Date | null;
}

/** Inserts the subscription (its insert trigger writes subscription.created); returns its id. */
export async function seedSubscription(pool: Pool, s: SeedSubscription): Promise<string> {
  const id = newId('sub');
  await pool.query(
    `insert into subscriptions (id, account_id, environment, customer_id, price_id, status, mode, amount, amount_atomic, currency,
       cadence, interval_seconds, network, chain_id, contract_address, onchain_id, platform_fee_bps, started_at, current_period_start,
       next_charge_at, ends_at, subscriber_address, payee_address, token_address, token_decimals, fee_address, operator_address)
     values ($1, $2, $3, $4, $5, 'active', 'pull', $6::numeric, $7::numeric, 'USDC', 'custom', $8::integer, $9, $10, $11, $12, $13, $14::timestamptz, $14::timestamptz,
       $14::timestamptz + make_interval(secs => $8::integer), $15, $16, $17, $18, $19, $20, $21)`,
    [
      id, s.accountId, s.environment ?? 'sandbox', s.customerId, s.priceId, s.amount, s.amountAtomic, s.intervalSeconds,
      s.network ?? 'local', s.chainId ?? 31337, s.contract, s.onchainId, s.feeBps ?? 0, s.startedAt, s.endsAt ?? null,
      s.subscriber, s.payee, s.token, s.tokenDecimals ?? 6, s.feeAddress, s.operator,
    ],
  );
  return id;
}
