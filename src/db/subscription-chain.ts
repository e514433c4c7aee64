// What the chain's subscription contract makes in the schema (issue 26, /work/coord's interface):
// the subscription of a confirmed Subscribed log that matched its checkout, and the cancel a
// confirmed Canceled log records. Called by the watcher's kinds (src/chain/kinds/subscribe.ts,
// cancel.ts) inside the range's transaction.
import type { Queryable } from './pool.js';

/** A checkout's terms as the detector holds them (one row per locked checkout invoice). */
export interface CheckoutTermsRow {
  id: string;
  checkout_reference: string;
  contract_address: string;
  payee_address: string;
  token_address: string;
  amount_atomic: string;
  period_seconds: number;
  fee_bps: number;
  fee_address: string;
  operator_address: string;
  ends_at: string | null;
  subscription_id: string | null;
  /** The on-chain id of the subscription the checkout made (null: none yet). */
  subscription_onchain_id: string | null;
}

/** The columns of PAYABLE (db/payments.ts) naming an invoice's checkout: null for any other invoice. */
export const CHECKOUT_OF_INVOICE = `(select json_build_object('id', c.id, 'checkout_reference', c.checkout_reference,
    'contract_address', c.contract_address, 'payee_address', c.payee_address, 'token_address', c.token_address,
    'amount_atomic', c.amount_atomic::text, 'period_seconds', c.period_seconds, 'fee_bps', c.fee_bps,
    'fee_address', c.fee_address, 'operator_address', c.operator_address, 'ends_at', c.ends_at, 'subscription_id', c.subscription_id,
    'subscription_onchain_id', (select s.onchain_id from subscriptions s where s.id = c.subscription_id))
   from subscription_checkouts c where c.invoice_id = i.id) as checkout`;

/** The chain's facts of a subscription a confirmed Subscribed log made. */
export interface SubscriptionFromChain {
  id: string;
  checkoutReference: string;
  chainId: number;
  contractAddress: string;
  onchainId: string;
  subscriber: string;
  payee: string;
  token: string;
  feeAddress: string;
  operator: string;
  feeBps: number;
  periodSeconds: number;
  startedAt: Date;
  endsAt: Date | null;
}

/**
 * Makes the subscription of a checkout that has none yet (its terms were checked against the log),
 * names it on the checkout, and makes the checkout's invoice its period 0. Null when the checkout
 * already has one, or a subscription of that contract and id exists (nothing written).
 */
export async function createSubscriptionOfCheckout(db: Queryable, s: SubscriptionFromChain): Promise<{ id: string; invoiceId: string } | null> {
  const { rows } = await db.query<{ id: string; invoice_id: string }>(
    `with c as (
       select c.* from subscription_checkouts c
       where c.checkout_reference = $2 and c.chain_id = $3 and c.subscription_id is null
       for update
     ), made as (
       insert into subscriptions (id, account_id, environment, customer_id, price_id, status, mode, amount, amount_atomic,
         currency, cadence, interval_seconds, network, chain_id, contract_address, onchain_id, platform_fee_bps,
         started_at, current_period_start, next_charge_at, ends_at, subscriber_address, payee_address, token_address,
         token_decimals, fee_address, operator_address, checkout_reference)
       select $1, c.account_id, c.environment, c.customer_id, c.price_id, 'active', 'pull', p.amount, c.amount_atomic,
         p.currency, p.cadence, $11::integer, p.network, $3, $4, $5, $10::integer,
         $12::timestamptz, $12::timestamptz, $12::timestamptz + make_interval(secs => $11::integer), $13::timestamptz,
         $6, $7, $8, p.token_decimals, $9, $14, $2
       from c join prices p on p.id = c.price_id
       -- A row of that contract and id already (made by hand): never a failing range that would
       -- hold the chain's cursor back for good; the checkout stays without one.
       on conflict do nothing
       returning id
     ), named as (
       update subscription_checkouts sc set subscription_id = made.id from made, c where sc.id = c.id returning sc.invoice_id
     )
     select made.id, named.invoice_id from made, named`,
    [
      s.id, s.checkoutReference, s.chainId, s.contractAddress, s.onchainId, s.subscriber, s.payee, s.token, s.feeAddress,
      s.feeBps, s.periodSeconds, s.startedAt.toISOString(), s.endsAt?.toISOString() ?? null, s.operator,
    ],
  );
  const made = rows[0];
  if (!made) return null;
  // A separate statement: the CTE's insert is not visible to a sibling's foreign key check on invoices.
  await db.query(
    `update invoices set subscription_id = $2, period_index = 0, period_start = $3::timestamptz,
       period_end = $3::timestamptz + make_interval(secs => $4::integer), updated_at = now()
     where id = $1`,
    [made.invoice_id, made.id, s.startedAt.toISOString(), s.periodSeconds],
  );
  return { id: made.id, invoiceId: made.invoice_id };
}

/** A confirmed Canceled log: who sent the cancel, and when the block was. */
export interface ChainCancel {
  chainId: number;
  contractAddress: string;
  onchainId: string;
  by: string;
  at: Date;
}

/**
 * Records confirmed cancels: a subscription still active or past due turns canceled, by the
 * customer when its subscriber sent it, by the merchant when its payee did (the operator's cancel
 * follows the API's or dunning's, which canceled the row first); every one known gets
 * onchain_canceled_at. Returns how many named a subscription of ours.
 */
export async function recordChainCancels(db: Queryable, cancels: readonly ChainCancel[]): Promise<number> {
  if (cancels.length === 0) return 0;
  const { rows } = await db.query<{ id: string }>(
    `update subscriptions s set
       status = case when s.status in ('canceled', 'ended') then s.status else 'canceled' end,
       canceled_at = case when s.status in ('canceled', 'ended') then s.canceled_at else coalesce(s.canceled_at, k.at) end,
       canceled_by = case
         when s.status in ('canceled', 'ended') then s.canceled_by
         when lower(k.by) = lower(s.subscriber_address) then 'customer'
         when lower(k.by) = lower(s.payee_address) then 'merchant'
         else coalesce(s.canceled_by, 'merchant') end,
       onchain_canceled_at = coalesce(s.onchain_canceled_at, k.at),
       updated_at = now()
     from unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[]) as k (contract, onchain_id, by, at)
     where s.chain_id = $1 and lower(s.contract_address) = lower(k.contract) and s.onchain_id = k.onchain_id
       and s.contract_address <> '0x0000000000000000000000000000000000000000'
     returning s.id`,
    [cancels[0].chainId, cancels.map((c) => c.contractAddress), cancels.map((c) => c.onchainId), cancels.map((c) => c.by), cancels.map((c) => c.at.toISOString())],
  );
  return rows.length;
}
