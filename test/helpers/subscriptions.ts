// Subscriptions seeded as the watcher makes them (/work/coord/subscriptions-interface.md): every
// chain field filled, started_at the subscribe block's time, next_charge_at one interval later.
// Until the watcher's Subscribed kind makes them from a real log, the lifecycle tests insert them
// so (with a real on-chain subscribe behind them where a chain is involved).
// Also: the operator address the API hands new checkouts in tests, and a subscription made in SQL
// from a real checkout (POST /pay/<link id>/subscribe) exactly as the watcher makes it.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Pool } from '../../src/db/pool.js';
import { wellKnownAccount } from '../../src/devchain/accounts.js';
import { newId } from '../../src/domain/ids.js';
import type { SubscriptionCheckoutAnswer } from '../../src/http/schemas/payment-page.js';
import type { Api } from '../../src/http/types.js';
import type { OperatorAddressOf } from '../../src/invoicing/subscription-checkout.js';
import { expect } from 'vitest';
import type { TestChain } from './anvil.js';
import type { ApiClient } from './http.js';

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

/**
 * The test operator: anvil's account 10 of the well-known mnemonic (the account the local chain's
 * relayer uses), so a test on anvil may sign charges and cancels with its key.
 */
export const TEST_OPERATOR = wellKnownAccount(10);

/** Every chain has the test operator: the injected `operatorAddress` of the API in tests. */
export const testOperatorAddress: OperatorAddressOf = () => TEST_OPERATOR.address;

export interface SeedFromCheckout {
  /** The wallet that subscribed. */
  subscriber: string;
  /** The contract's id (decimal). */
  onchainId: string;
  /** The Subscribed block's time. Default: now. */
  startedAt?: Date;
}

/** Makes the subscription of checkout `checkoutId` as the watcher does; returns its id. */
export async function seedSubscriptionFromCheckout(pool: Pool, checkoutId: string, s: SeedFromCheckout): Promise<string> {
  const id = `sub_${checkoutId.slice('subco_'.length)}`;
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(
      `insert into subscriptions (id, account_id, environment, customer_id, price_id, status, mode, amount, amount_atomic, currency,
         cadence, interval_seconds, network, chain_id, contract_address, onchain_id, platform_fee_bps, started_at,
         current_period_start, next_charge_at, ends_at, subscriber_address, payee_address, token_address, token_decimals,
         fee_address, operator_address, checkout_reference)
       select $1, k.account_id, k.environment, k.customer_id, k.price_id, 'active', 'pull', p.amount, k.amount_atomic, p.currency,
         p.cadence, k.period_seconds, p.network, k.chain_id, k.contract_address, $3, k.fee_bps, $4, $4,
         $4::timestamptz + make_interval(secs => k.period_seconds), k.ends_at, $2, k.payee_address, k.token_address, p.token_decimals,
         k.fee_address, k.operator_address, k.checkout_reference
       from subscription_checkouts k join prices p on p.id = k.price_id where k.id = $5`,
      [id, s.subscriber, s.onchainId, s.startedAt ?? new Date(), checkoutId],
    );
    await client.query('update subscription_checkouts set subscription_id = $1 where id = $2', [id, checkoutId]);
    await client.query(
      `update invoices i set subscription_id = $1, period_index = 0, period_start = s.started_at,
         period_end = s.started_at + make_interval(secs => s.interval_seconds)
       from subscriptions s where s.id = $1 and i.id = (select invoice_id from subscription_checkouts where id = $2)`,
      [id, checkoutId],
    );
    await client.query('commit');
  } catch (err) {
    await client.query('rollback');
    throw err;
  } finally {
    client.release();
  }
  return id;
}

/** A SubscriptionManager address for chains of tests that never call it (no chain runs). */
export const TEST_SUBSCRIPTION_MANAGER = '0x5555555555555555555555555555555555555555';
export const TEST_FEE_ADDRESS = '0x6666666666666666666666666666666666666666';

/**
 * A CHAINS_FILE giving the default sandbox chain (base-sepolia, 84532) a SubscriptionManager and a
 * fee address, so its recurring prices' links take subscription checkouts; returns its path.
 */
export function subscriptionChainsFile(extra: Record<string, unknown>[] = []): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'subscriptions-chains-')), 'chains.json');
  writeFileSync(file, JSON.stringify([{ chain_id: 84532, subscription_manager: TEST_SUBSCRIPTION_MANAGER, fee_address: TEST_FEE_ADDRESS }, ...extra]));
  return file;
}

/** POST /pay/<link id>/subscribe as the link page's script sends it (same origin); the answer's status and JSON. */
/** The subscription checkout's answer (the exact terms the wallet signs); the POST must be a 200. */
export async function subscriptionCheckoutAnswer(app: Api, linkId: string, customerEmail: string): Promise<SubscriptionCheckoutAnswer> {
  const res = await postSubscriptionCheckout(app, linkId, customerEmail);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as unknown as SubscriptionCheckoutAnswer;
}

export async function postSubscriptionCheckout(app: Api, linkId: string, customerEmail: string): Promise<{ status: number; body: { checkout_id: string } & Record<string, unknown> }> {
  const res = await app.inject({
    method: 'POST',
    url: `/pay/${linkId}/subscribe`,
    headers: { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
    payload: JSON.stringify({ customer_email: customerEmail }),
  });
  return { status: res.statusCode, body: res.json() };
}

/** A recurring price on the local chain (2 USDC every `intervalS` seconds) and its payment link: the link's id. */
export async function recurringLink(api: ApiClient, key: string, intervalS: number, name = 'Coffee club'): Promise<string> {
  const product = await api.post('/v1/products', key, { name, prices: [{ network: 'local', amount: '2', cadence: 'custom', interval_seconds: intervalS }] });
  expect(product.status, product.raw).toBe(200);
  const link = await api.post('/v1/payment-links', key, { name, price_id: product.body.data.prices[0].id });
  expect(link.status, link.raw).toBe(200);
  return link.body.data.id as string;
}

/**
 * A block every second, as a live chain makes them (anvil on automine makes one only for a
 * transaction, and a simulated charge runs at the latest block's time: without blocks a period
 * would never begin for the chain). clearInterval stops it.
 */
export function keepMining(chain: TestChain): NodeJS.Timeout {
  return setInterval(() => {
    chain.mine(1).catch(() => undefined);
  }, 1000);
}
