-- Up Migration

-- A subscription event stores the Subscription exactly as GET /v1/subscriptions/{id} presents it
-- (presentSubscription in src/http/presenters.ts), its customer, price, subscriber and cancel
-- fields included; test/integration/subscription-lifecycle-sql.test.ts compares them.
create or replace function subscription_object(s subscriptions) returns jsonb language sql stable as $$
  select jsonb_build_object(
    'id', s.id,
    'status', s.status,
    'mode', s.mode,
    'amount', s.amount::text,
    'amount_atomic', s.amount_atomic::text,
    'currency', s.currency,
    'cadence', s.cadence,
    'interval_seconds', s.interval_seconds,
    'network', s.network,
    'chain_id', s.chain_id,
    'contract_address', s.contract_address,
    'onchain_id', s.onchain_id,
    'platform_fee_bps', s.platform_fee_bps,
    'started_at', api_timestamp(s.started_at),
    'current_period_start', api_timestamp(s.current_period_start),
    'next_charge_at', api_timestamp(s.next_charge_at),
    'ends_at', api_timestamp(s.ends_at),
    'customer_id', s.customer_id,
    'customer_email', (select c.email from customers c where c.id = s.customer_id),
    'price_id', s.price_id,
    'subscriber_address', s.subscriber_address,
    'canceled_at', api_timestamp(s.canceled_at),
    'canceled_by', s.canceled_by
  )
$$;

-- Down Migration
create or replace function subscription_object(s subscriptions) returns jsonb language sql stable as $$
  select jsonb_build_object(
    'id', s.id,
    'status', s.status,
    'mode', s.mode,
    'amount', s.amount::text,
    'amount_atomic', s.amount_atomic::text,
    'currency', s.currency,
    'cadence', s.cadence,
    'interval_seconds', s.interval_seconds,
    'network', s.network,
    'chain_id', s.chain_id,
    'contract_address', s.contract_address,
    'onchain_id', s.onchain_id,
    'platform_fee_bps', s.platform_fee_bps,
    'started_at', api_timestamp(s.started_at),
    'current_period_start', api_timestamp(s.current_period_start),
    'next_charge_at', api_timestamp(s.next_charge_at),
    'ends_at', api_timestamp(s.ends_at)
  )
$$;
