-- Up Migration

-- Events: the record of what happened to a merchant's objects, written in the same transaction
-- as the change. Invoice events keep the invoice row as it was (`snapshot`, to_jsonb of the row)
-- and are presented on read by the API's own Invoice presenter, so an event written by a trigger
-- (a status change made by any writer, SQL included) carries exactly the object the API shows.
-- Other events keep the object as the API presented it when it was written (`object`).
create table events (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  type text not null,
  object_type text not null,
  object_id text not null,
  object jsonb,
  snapshot jsonb,
  -- clock_timestamp(): events of one transaction keep their order in the list.
  created_at timestamptz not null default clock_timestamp(),
  check ((object is null) <> (snapshot is null))
);
-- The list's keyset (db/page.ts): newest first by (created_at, id), optionally of one type.
create index events_list_idx on events (account_id, environment, created_at, id);
create index events_type_idx on events (account_id, environment, type, created_at, id);
create index events_created_idx on events (created_at);

-- evt_ + 24 base62 characters, like the ids the application makes (domain/ids.ts).
create function new_event_id() returns text language sql volatile as $$
  select 'evt_' || left(string_agg(substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', (get_byte(r.b, i) % 62) + 1, 1), '' order by i), 24)
  from (select decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex') as b) r,
       generate_series(0, 31) as i
  where i not in (6, 8, 22, 24) -- the uuid version and variant bytes are not random
$$;

-- The one writer of events: every event, from the API, a worker or a trigger, goes through here.
-- When the account has an enabled webhook endpoint in that environment, the event's fan-out job
-- is written to the outbox in the same transaction (job name and id as in the job catalogue,
-- src/queue/catalogue.ts 'webhook.fanout'), and the workers are woken at commit to relay it.
create function emit_event(
  p_account_id text, p_environment environment, p_type text, p_object_type text, p_object_id text,
  p_object jsonb, p_snapshot jsonb
) returns text language plpgsql as $$
declare
  v_id text := new_event_id();
begin
  insert into events (id, account_id, environment, type, object_type, object_id, object, snapshot)
  values (v_id, p_account_id, p_environment, p_type, p_object_type, p_object_id, p_object, p_snapshot);
  if exists (select 1 from webhook_endpoints
             where account_id = p_account_id and environment = p_environment and status = 'enabled') then
    insert into outbox (job_name, job_id, payload)
    values ('webhook.fanout', 'webhook.fanout-' || v_id, jsonb_build_object('eventId', v_id))
    on conflict (job_id) do nothing;
    perform pg_notify('outbox_pending', '');
  end if;
  return v_id;
end;
$$;

-- An event about an invoice as its row stands now, in the caller's transaction, with `p_patch`
-- applied to the snapshot (a column the caller changes right after, without locking the row
-- here). A plain read: it takes no lock on the invoice.
create function emit_invoice_event(p_invoice_id text, p_type text, p_patch jsonb default '{}') returns text language plpgsql as $$
declare
  r invoices;
begin
  select * into r from invoices where id = p_invoice_id;
  if not found then
    return null;
  end if;
  return emit_event(r.account_id, r.environment, p_type, 'invoice', r.id, null, to_jsonb(r) || p_patch);
end;
$$;

-- The single writer of invoice.created and of every status-change event, whoever made the
-- change: the API, a worker (overdue), the payment detector or an operator's SQL (paid, void).
-- One event per row change: an UPDATE that leaves the status as it was emits nothing.
create function invoices_emit_events() returns trigger language plpgsql as $$
declare
  v_type text;
begin
  if tg_op = 'INSERT' then
    v_type := 'invoice.created';
  elsif new.status is distinct from old.status then
    v_type := case
      when new.status = 'open' and old.status = 'draft' then 'invoice.sent'
      when new.status = 'overdue' then 'invoice.overdue'
      when new.status = 'paid' then 'invoice.paid'
      when new.status = 'void' then 'invoice.voided'
      else 'invoice.updated'
    end;
  else
    return null;
  end if;
  perform emit_event(new.account_id, new.environment, v_type, 'invoice', new.id, null, to_jsonb(new));
  return null;
end;
$$;

create trigger invoices_emit_events
  after insert or update of status on invoices
  for each row execute function invoices_emit_events();

-- Webhook endpoints: where a merchant wants events delivered, per account and environment.
create table webhook_endpoints (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  url text not null,
  description text,
  enabled_events text[] not null,
  status text not null default 'enabled' check (status in ('enabled', 'disabled')),
  disabled_reason text,
  -- The signing secret (whsec_...): needed in clear to sign, never returned after creation or
  -- rotation, never logged, never put in job data.
  secret text not null,
  -- After a rotation the old secret signs alongside the new one until it expires.
  previous_secret text,
  previous_secret_expires_at timestamptz,
  -- Start of the current run of failed attempts (null after any success): the auto-disable clock.
  failing_since timestamptz,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp()
);
create index webhook_endpoints_account_idx on webhook_endpoints (account_id, environment, created_at);

-- One delivery per (event, endpoint): relaying or fanning out twice never makes a second one.
create table webhook_deliveries (
  id text primary key,
  event_id text not null references events (id) on delete cascade,
  endpoint_id text not null references webhook_endpoints (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempt_count integer not null default 0,
  last_status_code integer,
  last_error text,
  last_duration_ms integer,
  next_attempt_at timestamptz,
  succeeded_at timestamptz,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  unique (event_id, endpoint_id)
);
create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, created_at);
create index webhook_deliveries_pending_idx on webhook_deliveries (status) where status = 'pending';

-- Every attempt of a delivery, for the deliveries list.
create table webhook_attempts (
  delivery_id text not null references webhook_deliveries (id) on delete cascade,
  attempt integer not null,
  started_at timestamptz not null,
  status_code integer,
  duration_ms integer not null,
  error text,
  primary key (delivery_id, attempt)
);

-- Down Migration
drop table webhook_attempts, webhook_deliveries, webhook_endpoints;
drop trigger invoices_emit_events on invoices;
drop function invoices_emit_events();
drop function emit_invoice_event(text, text, jsonb);
drop function emit_event(text, environment, text, text, text, jsonb, jsonb);
drop function new_event_id();
drop table events;
