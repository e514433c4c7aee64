-- Up Migration

-- One id generator for SQL, the same as TypeScript's (src/domain/ids.ts newId): the prefix, '_',
-- then 24 base62 characters drawn by rejection sampling (bytes >= 248 are skipped, so every
-- character is equally likely). Every trigger and function that makes an id calls it;
-- test/integration/rules-parity.test.ts compares its output with newId's. The random bytes are
-- gen_random_uuid()'s (a strong source), without the version and variant bytes.
create function new_id(p_prefix text) returns text language plpgsql volatile as $$
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

-- emit_event: its id from new_id; no NOTIFY of its own any more, the statement-level trigger on
-- outbox (migration 1700000001410) wakes the relay for every writer.
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

-- The receipt's delivery id: base62 like every other dlv_ id (it was 24 hex digits).
create or replace function enqueue_invoice_receipt() returns trigger language plpgsql as $$
declare
  delivery_id text := new_id('dlv');
  inserted text;
begin
  -- message_id is left empty: the worker derives it from the delivery id and MAIL_FROM's domain
  -- (mail/message-id.ts), which the database does not know.
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

drop function new_event_id();

-- Down Migration
create function new_event_id() returns text language sql volatile as $$
  select 'evt_' || left(string_agg(substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', (get_byte(r.b, i) % 62) + 1, 1), '' order by i), 24)
  from (select decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex') as b) r,
       generate_series(0, 31) as i
  where i not in (6, 8, 22, 24)
$$;
create or replace function emit_event(
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
create or replace function enqueue_invoice_receipt() returns trigger language plpgsql as $$
declare
  delivery_id text := 'dlv_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24);
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
drop function new_id(text);
