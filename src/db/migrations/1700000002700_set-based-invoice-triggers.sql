-- Up Migration

-- Events and the invoice triggers a set at a time (issue 28, bench:chain). The payment detector
-- applies a range's payments with one UPDATE of invoices; its row triggers ran three PL/pgSQL
-- functions per invoice (emit_event, the receipt, the reminders' stop notification), and the
-- range's payment events were one emit_event call each. The same rules now run once per
-- statement over its transition tables, and emit_events writes many events and their webhook
-- deliveries in two statements. What they write, and for which rows, is unchanged, but for one
-- gap closed: the reminders' stop also fires when due_at alone turns the rule false (the row
-- trigger ran only on updates of status and reminders_enabled; no writer of the API does that to
-- an open invoice today).

-- new_id with three calls of the CSPRNG and no loop: 42 random bytes of three uuids (each
-- without its version and variant bytes, 6 and 8) in base64, whose 64 characters are equally
-- likely; dropping '+' and '/' leaves the 62 of base62, still equally likely (rejection sampling
-- by the character instead of by the byte, as newId does in src/domain/ids.ts). 56 characters
-- hold the 24 needed unless 33 are dropped (odds below 1e-34); then it draws again (which drops
-- depend on nothing the kept characters are, so they stay uniform). About 10 us instead of 20 per
-- id: a range of bench:chain makes 20,000.
create or replace function new_id(p_prefix text) returns text language plpgsql volatile as $$
declare
  a bytea := uuid_send(gen_random_uuid());
  b bytea := uuid_send(gen_random_uuid());
  c bytea := uuid_send(gen_random_uuid());
  body text := translate(encode(
    substr(a, 1, 6) || substr(a, 8, 1) || substr(a, 10, 7) ||
    substr(b, 1, 6) || substr(b, 8, 1) || substr(b, 10, 7) ||
    substr(c, 1, 6) || substr(c, 8, 1) || substr(c, 10, 7), 'base64'), E'+/\n', '');
begin
  if length(body) < 24 then
    return new_id(p_prefix);
  end if;
  return p_prefix || '_' || left(body, 24);
end;
$$;

-- One event to write: what emit_event takes, with its id.
create type event_write as (
  id text, account_id text, environment environment, type text, object_type text, object_id text, object jsonb, snapshot jsonb
);

-- The single writer of events: each event, in the order given (created_at is clock_timestamp(),
-- so the list keeps that order), and its deliveries, one per enabled endpoint of its account and
-- environment that wants its kind (endpoints created later do not exist yet, so "existed when it
-- happened" holds by itself). The NOTIFY wakes the workers' delivery loops at commit.
create function emit_events(p_events event_write[]) returns void language plpgsql as $$
begin
  with e as (
    insert into events (id, account_id, environment, type, object_type, object_id, object, snapshot)
    select t.id, t.account_id, t.environment, t.type, t.object_type, t.object_id, t.object, t.snapshot
    from unnest(p_events) with ordinality as t (id, account_id, environment, type, object_type, object_id, object, snapshot, n)
    order by t.n
    returning id, account_id, environment, type, created_at
  )
  insert into webhook_deliveries (id, event_id, endpoint_id)
  select new_id('whd'), e.id, w.id
  from e join webhook_endpoints w on w.account_id = e.account_id and w.environment = e.environment
  where w.status = 'enabled' and webhook_endpoint_wants(w.enabled_events, e.type)
  order by e.created_at, e.id;
  if found then
    perform pg_notify('webhook_deliveries_due', '');
  end if;
end;
$$;

create or replace function emit_event(
  p_account_id text, p_environment environment, p_type text, p_object_type text, p_object_id text,
  p_object jsonb, p_snapshot jsonb
) returns text language plpgsql as $$
declare
  v_id text := new_id('evt');
begin
  perform emit_events(array[row(v_id, p_account_id, p_environment, p_type, p_object_type, p_object_id, p_object, p_snapshot)::event_write]);
  return v_id;
end;
$$;

-- invoice.created for every inserted invoice, and every status-change event, whoever made the
-- change: the API, a worker (overdue), the payment detector or an operator's SQL (paid, void).
-- One event per row whose status changed: an UPDATE that leaves the status as it was emits
-- nothing. The rows keep the statement's order (row_number over the transition table's scan).
drop trigger invoices_emit_events on invoices;
drop function invoices_emit_events();

create function invoices_emit_created_events() returns trigger language plpgsql as $$
begin
  perform emit_events(array(
    select row(new_id('evt'), (x.r).account_id, (x.r).environment, 'invoice.created', 'invoice', (x.r).id, null, to_jsonb(x.r))::event_write
    from (select n as r, row_number() over () as ord from new_rows n) x
    order by x.ord));
  return null;
end;
$$;

create trigger invoices_emit_created_events
  after insert on invoices
  referencing new table as new_rows
  for each statement execute function invoices_emit_created_events();

create function invoices_emit_status_events() returns trigger language plpgsql as $$
begin
  perform emit_events(array(
    select row(new_id('evt'), (x.r).account_id, (x.r).environment,
      case
        when (x.r).status = 'open' and o.status = 'draft' then 'invoice.sent'
        when (x.r).status = 'overdue' then 'invoice.overdue'
        when (x.r).status = 'paid' then 'invoice.paid'
        when (x.r).status = 'void' then 'invoice.voided'
        else 'invoice.updated'
      end,
      'invoice', (x.r).id, null, to_jsonb(x.r))::event_write
    from (select n as r, row_number() over () as ord from new_rows n) x
    join old_rows o on o.id = (x.r).id
    where (x.r).status is distinct from o.status
    order by x.ord));
  return null;
end;
$$;

-- Transition tables rule out a column list (UPDATE OF status): the trigger runs for every UPDATE
-- of invoices and finds the rows whose status changed itself.
create trigger invoices_emit_status_events
  after update on invoices
  referencing old table as old_rows new table as new_rows
  for each statement execute function invoices_emit_status_events();

-- The receipt owed by every invoice that turned paid: its delivery row (once per invoice: the
-- unique receipt delivery) and its outbox job. message_id is left empty: the worker derives it
-- from the delivery id and MAIL_FROM's domain (mail/message-id.ts), which the database does not know.
drop trigger invoices_enqueue_receipt on invoices;
drop function enqueue_invoice_receipt();

create function invoices_enqueue_receipts() returns trigger language plpgsql as $$
begin
  with d as (
    insert into deliveries (id, invoice_id, kind, slot_at, message_id)
    select new_id('dlv'), n.id, 'receipt', coalesce(n.paid_at, now()), ''
    from new_rows n join old_rows o on o.id = n.id
    where n.status = 'paid' and o.status is distinct from 'paid'
    on conflict do nothing
    returning id, invoice_id
  )
  insert into outbox (job_name, job_id, payload)
  select 'invoice.receipt', 'invoice.receipt-' || d.invoice_id || '-' || d.id, jsonb_build_object('invoiceId', d.invoice_id, 'deliveryId', d.id)
  from d
  on conflict (job_id) do nothing;
  return null;
end;
$$;

create trigger invoices_enqueue_receipts
  after update on invoices
  referencing old table as old_rows new table as new_rows
  for each statement execute function invoices_enqueue_receipts();

-- The reminders' stop: a notification for each invoice whose "reminders run" rule
-- (invoice_reminders_run) turned from true to false.
drop trigger invoices_reminders_stop on invoices;
drop function notify_invoice_reminders_stop();

create function invoices_notify_reminders_stop() returns trigger language plpgsql as $$
begin
  perform pg_notify('invoice_reminders_stop', n.id)
  from new_rows n join old_rows o on o.id = n.id
  where invoice_reminders_run(o.status, o.reminders_enabled, o.due_at)
    and not invoice_reminders_run(n.status, n.reminders_enabled, n.due_at);
  return null;
end;
$$;

create trigger invoices_reminders_stop
  after update on invoices
  referencing old table as old_rows new table as new_rows
  for each statement execute function invoices_notify_reminders_stop();

-- Down Migration

drop trigger invoices_reminders_stop on invoices;
drop function invoices_notify_reminders_stop();
create function notify_invoice_reminders_stop() returns trigger language plpgsql as $$
begin
  if invoice_reminders_run(old.status, old.reminders_enabled, old.due_at)
     and not invoice_reminders_run(new.status, new.reminders_enabled, new.due_at) then
    perform pg_notify('invoice_reminders_stop', new.id);
  end if;
  return new;
end;
$$;
create trigger invoices_reminders_stop
  after update of status, reminders_enabled on invoices
  for each row execute function notify_invoice_reminders_stop();

drop trigger invoices_enqueue_receipts on invoices;
drop function invoices_enqueue_receipts();
create function enqueue_invoice_receipt() returns trigger language plpgsql as $$
declare
  delivery_id text := new_id('dlv');
  inserted text;
begin
  insert into deliveries (id, invoice_id, kind, slot_at, message_id)
  values (delivery_id, new.id, 'receipt', coalesce(new.paid_at, now()), '')
  on conflict do nothing
  returning id into inserted;
  if inserted is not null then
    insert into outbox (job_name, job_id, payload)
    values ('invoice.receipt', 'invoice.receipt-' || new.id || '-' || inserted,
            jsonb_build_object('invoiceId', new.id, 'deliveryId', inserted))
    on conflict (job_id) do nothing;
  end if;
  return new;
end;
$$;
create trigger invoices_enqueue_receipt
  after update of status on invoices
  for each row
  when (new.status = 'paid' and old.status is distinct from 'paid')
  execute function enqueue_invoice_receipt();

drop trigger invoices_emit_status_events on invoices;
drop function invoices_emit_status_events();
drop trigger invoices_emit_created_events on invoices;
drop function invoices_emit_created_events();
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
drop function emit_events(event_write[]);
drop type event_write;
create or replace function new_id(p_prefix text) returns text language plpgsql volatile as $$
declare
  alphabet constant text := '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  body text := '';
  bytes bytea;
  b int;
begin
  while length(body) < 24 loop
    bytes := uuid_send(gen_random_uuid());
    for i in 0..15 loop
      continue when i in (6, 8);
      b := get_byte(bytes, i);
      if b < 248 and length(body) < 24 then
        body := body || substr(alphabet, b % 62 + 1, 1);
      end if;
    end loop;
  end loop;
  return p_prefix || '_' || body;
end;
$$;
