-- Up Migration

-- The subscription lifecycle (issue 26, docs/subscriptions.md "Every period", "Attempts and
-- dunning"): when the worker next looks at a subscription, what it sent, the advance of a
-- subscription when one of its period invoices turns paid, and the subscription events.

-- When the worker next looks at this subscription (jobs/subscriptions-charge.ts and
-- jobs/subscriptions-cancel.ts): a period's first attempt (next_charge_at), a dunning retry (the
-- period invoice's next_attempt_at), the check of a charge or cancel it sent, the end (ends_at).
-- A worker claims a due row by moving this to the end of its lease (FOR UPDATE SKIP LOCKED) and
-- writes its outcome only where the column still holds that lease: a crashed worker's rows are
-- due again once the lease ends, and a payment that advanced the row meanwhile wins. Null:
-- nothing to do (ended, canceled and known on-chain, a sandbox row on no chain).
alter table subscriptions
  add column next_work_at timestamptz,
  -- The on-chain cancel the relayer sent for a merchant's or dunning's cancel (null until sent).
  add column cancel_tx_hash text,
  add column cancel_sent_at timestamptz;
create index subscriptions_next_work_idx on subscriptions (next_work_at) where next_work_at is not null;

-- The last charge the relayer sent for a period invoice (the watcher's Charged log pays it).
alter table invoices
  add column charge_tx_hash text,
  add column charge_sent_at timestamptz;

-- The email of a failed attempt (jobs/invoice-payment-failed.ts): one per attempt, its slot the
-- attempt's instant (unique with the invoice and the kind, as every delivery).
alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after', 'receipt', 'partial_payment', 'payment_failed'));

-- A timestamp as the API writes it (JavaScript's toISOString: milliseconds, UTC, "Z").
create function api_timestamp(t timestamptz) returns text language sql immutable as $$
  select to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The Subscription object of GET /v1/subscriptions/{id} (presentSubscription in
-- src/http/presenters.ts; test/integration/subscription-lifecycle-sql.test.ts compares them).
create function subscription_object(s subscriptions) returns jsonb language sql stable as $$
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

-- The one writer of subscription events, whoever made the change (the watcher's insert and its
-- customer cancel, the API's cancel, the worker's past_due / dunning cancel / end, plain SQL):
-- subscription.created at insert, then one event per status change into past_due, canceled or
-- ended (past_due -> active emits none: invoice.paid says it). The object is stored as presented;
-- a canceled one says who canceled.
create function subscriptions_emit_events() returns trigger language plpgsql as $$
declare
  v_type text;
  v_object jsonb;
begin
  if tg_op = 'INSERT' then
    -- The sandbox test helper's contract-less rows (the zero address) get theirs from the helper
    -- itself, which goes with issue 26: not written twice meanwhile.
    if new.contract_address = '0x0000000000000000000000000000000000000000' then
      return null;
    end if;
    v_type := 'subscription.created';
  elsif new.status is distinct from old.status then
    v_type := case new.status
      when 'past_due' then 'subscription.past_due'
      when 'canceled' then 'subscription.canceled'
      when 'ended' then 'subscription.ended'
    end;
  end if;
  if v_type is null then
    return null;
  end if;
  v_object := subscription_object(new);
  if new.status = 'canceled' then
    v_object := v_object || jsonb_build_object('canceled_by', new.canceled_by);
  end if;
  perform emit_event(new.account_id, new.environment, v_type, 'subscription', new.id, v_object, null);
  return null;
end;
$$;

create trigger subscriptions_emit_events
  after insert or update of status on subscriptions
  for each row execute function subscriptions_emit_events();

-- What a status change means for the worker, whoever wrote it. At insert the first thing to do
-- is period 1 at next_charge_at. Canceled by the merchant or by dunning and not yet seen
-- on-chain: the cancel job sends it now (the contract must refuse every later charge); canceled
-- by the customer on-chain, or ended: nothing left to do.
create function subscriptions_plan_work() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    if new.next_work_at is null and new.status in ('active', 'past_due')
       and new.contract_address <> '0x0000000000000000000000000000000000000000' then
      new.next_work_at := case when new.ends_at is not null and new.ends_at <= new.next_charge_at then new.ends_at else new.next_charge_at end;
    end if;
    return new;
  end if;
  if new.status is not distinct from old.status then
    return new;
  end if;
  if new.status = 'canceled' then
    new.canceled_at := coalesce(new.canceled_at, clock_timestamp());
    new.next_work_at := case
      when new.onchain_canceled_at is null and new.canceled_by in ('merchant', 'dunning')
           and new.contract_address <> '0x0000000000000000000000000000000000000000' then clock_timestamp()
    end;
  elsif new.status = 'ended' then
    new.ended_at := coalesce(new.ended_at, clock_timestamp());
    new.next_work_at := null;
  end if;
  return new;
end;
$$;

create trigger subscriptions_plan_work
  before insert or update of status on subscriptions
  for each row execute function subscriptions_plan_work();

-- A subscription that stops (canceled, ended) stops its dunning: no open period invoice of it
-- announces another attempt.
create function subscriptions_stop_attempts() returns trigger language plpgsql as $$
begin
  update invoices set next_attempt_at = null, updated_at = clock_timestamp()
  where subscription_id = new.id and status in ('open', 'overdue') and next_attempt_at is not null;
  return null;
end;
$$;

create trigger subscriptions_stop_attempts
  after update of status on subscriptions
  for each row when (new.status in ('canceled', 'ended') and old.status is distinct from new.status)
  execute function subscriptions_stop_attempts();

-- A paid period invoice announces no further attempt.
create function invoices_paid_period_no_attempt() returns trigger language plpgsql as $$
begin
  new.next_attempt_at := null;
  return new;
end;
$$;

create trigger invoices_paid_period_no_attempt
  before update of status on invoices
  for each row when (new.status = 'paid' and old.status <> 'paid' and new.subscription_id is not null)
  execute function invoices_paid_period_no_attempt();

-- When a period invoice turns paid, whatever paid it (the relayer's charge, the subscribe call,
-- a wallet payment of its reference, the sandbox), its subscription advances
-- (/work/coord/subscriptions-interface.md): current_period_start and next_charge_at never move
-- back; the contract's lastChargedPeriod when a charge paid it; past_due -> active once no other
-- period invoice of it is unpaid with a failed attempt. A running subscription's worker clock
-- moves to the next period's start (or its end, when it ends first); a worker holding a lease on
-- it then finds its lease gone and writes nothing.
create function invoices_advance_subscription() returns trigger language plpgsql as $$
begin
  update subscriptions s set
    current_period_start = greatest(s.current_period_start, coalesce(new.period_start, s.current_period_start)),
    next_charge_at = greatest(s.next_charge_at, new.period_end),
    next_work_at = case
      when s.status in ('active', 'past_due') and new.period_end > coalesce(s.next_charge_at, '-infinity') then
        case when s.ends_at is not null and s.ends_at <= new.period_end then s.ends_at else new.period_end end
      else s.next_work_at
    end,
    last_charged_period = case
      when exists (select 1 from payments p where p.invoice_id = new.id and p.kind = 'charge' and p.status = 'confirmed')
        then greatest(s.last_charged_period, new.period_index)
      else s.last_charged_period
    end,
    status = case
      when s.status = 'past_due' and not exists (
        select 1 from invoices i
        where i.subscription_id = s.id and i.id <> new.id and i.status in ('open', 'overdue') and i.failure_code is not null
      ) then 'active'
      else s.status
    end,
    updated_at = clock_timestamp()
  where s.id = new.subscription_id;
  return null;
end;
$$;

create trigger invoices_advance_subscription
  after update of status on invoices
  for each row when (new.status = 'paid' and old.status <> 'paid' and new.subscription_id is not null and new.period_index is not null)
  execute function invoices_advance_subscription();

-- Down Migration
drop trigger invoices_advance_subscription on invoices;
drop function invoices_advance_subscription();
drop trigger invoices_paid_period_no_attempt on invoices;
drop function invoices_paid_period_no_attempt();
drop trigger subscriptions_stop_attempts on subscriptions;
drop function subscriptions_stop_attempts();
drop trigger subscriptions_plan_work on subscriptions;
drop function subscriptions_plan_work();
drop trigger subscriptions_emit_events on subscriptions;
drop function subscriptions_emit_events();
drop function subscription_object(subscriptions);
drop function api_timestamp(timestamptz);
delete from deliveries where kind = 'payment_failed';
alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after', 'receipt', 'partial_payment'));
alter table invoices drop column charge_tx_hash, drop column charge_sent_at;
drop index subscriptions_next_work_idx;
alter table subscriptions drop column next_work_at, drop column cancel_tx_hash, drop column cancel_sent_at;
