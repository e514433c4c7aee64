-- Up Migration

-- Webhook deliveries in batches (issue 28). A worker claims many due deliveries in one
-- statement (FOR UPDATE SKIP LOCKED) and leases them: the claim moves next_attempt_at to the end
-- of the lease and stamps lease_id. The outcomes are recorded only where lease_id is still the
-- claimer's; a worker that dies mid-batch records nothing, and its deliveries are due again when
-- the lease ends (at least once: never lost, maybe sent twice with the same webhook-id).
alter table webhook_deliveries add column lease_id uuid;

-- The claim reads pending deliveries oldest-due first (a fresh one is due at its creation).
create index webhook_deliveries_due_idx on webhook_deliveries ((coalesce(next_attempt_at, created_at))) where status = 'pending';
drop index webhook_deliveries_pending_idx;

-- Whether an endpoint's enabled_events take an event kind: '*' or the kind itself. The same rule
-- as endpointWants (src/domain/events.ts); test/integration/webhook-batches.test.ts compares them.
create function webhook_endpoint_wants(p_enabled_events text[], p_type text) returns boolean
language sql immutable as $$
  select '*' = any(p_enabled_events) or p_type = any(p_enabled_events)
$$;

-- emit_event writes the event's deliveries itself, in the event's transaction: one row per
-- enabled endpoint of its account and environment that wants its kind (endpoints created later
-- do not exist yet, so "existed when it happened" holds by itself). No fan-out job any more: a
-- job per event was the bound of the old path. The NOTIFY wakes the workers' delivery loops at
-- commit (notifications of one transaction collapse into one).
create or replace function emit_event(
  p_account_id text, p_environment environment, p_type text, p_object_type text, p_object_id text,
  p_object jsonb, p_snapshot jsonb
) returns text language plpgsql as $$
declare
  v_id text := new_id('evt');
begin
  insert into events (id, account_id, environment, type, object_type, object_id, object, snapshot)
  values (v_id, p_account_id, p_environment, p_type, p_object_type, p_object_id, p_object, p_snapshot);
  insert into webhook_deliveries (id, event_id, endpoint_id)
  select new_id('whd'), v_id, w.id from webhook_endpoints w
  where w.account_id = p_account_id and w.environment = p_environment and w.status = 'enabled'
    and webhook_endpoint_wants(w.enabled_events, p_type);
  if found then
    perform pg_notify('webhook_deliveries_due', '');
  end if;
  return v_id;
end;
$$;

-- Down Migration
create or replace function emit_event(
  p_account_id text, p_environment environment, p_type text, p_object_type text, p_object_id text,
  p_object jsonb, p_snapshot jsonb
) returns text language plpgsql as $$
declare
  v_id text := new_id('evt');
begin
  insert into events (id, account_id, environment, type, object_type, object_id, object, snapshot)
  values (v_id, p_account_id, p_environment, p_type, p_object_type, p_object_id, p_object, p_snapshot);
  if exists (select 1 from webhook_endpoints
             where account_id = p_account_id and environment = p_environment and status = 'enabled') then
    insert into outbox (job_name, job_id, payload)
    values ('webhook.fanout', 'webhook.fanout-' || v_id, jsonb_build_object('eventId', v_id))
    on conflict (job_id) do nothing;
  end if;
  return v_id;
end;
$$;
drop function webhook_endpoint_wants(text[], text);
create index webhook_deliveries_pending_idx on webhook_deliveries (status) where status = 'pending';
drop index webhook_deliveries_due_idx;
alter table webhook_deliveries drop column lease_id;
