-- Up Migration

-- Dust toward an invoice counts but announces nothing: a payment that counted less than the dust
-- floor (0.01 of a token unit; dustFloorAtomic in src/domain/payments.ts, the parity test checks
-- the two agree) makes no partial-payment email. Anyone can repeat such a payment naming a known
-- reference for the gas alone; without this, each one mailed the invoice's customer.

create function dust_floor_atomic(decimals integer) returns numeric language sql immutable as $$
  select (case when decimals >= 2 then 10::numeric ^ (decimals - 2) else 1 end)::numeric(78, 0)
$$;

create or replace function enqueue_partial_payment_email() returns trigger language plpgsql as $$
declare
  pay record;
  inv record;
  inserted text;
begin
  -- Deferred: NEW is the row as it was when the event was queued; read it as it is now.
  select p.id, p.invoice_id, p.status, p.outcome, p.counted_atomic into pay from payments p where p.id = new.id;
  if pay.invoice_id is null or pay.status <> 'confirmed' or pay.outcome is distinct from 'applied' then
    return null;
  end if;
  select i.id, i.status, i.amount_atomic, i.amount_paid_atomic, i.token_decimals into inv from invoices i where i.id = pay.invoice_id;
  if inv.status not in ('open', 'overdue') or inv.amount_atomic is null then
    return null;
  end if;
  if coalesce(pay.counted_atomic, 0) < dust_floor_atomic(inv.token_decimals) then
    return null;
  end if;
  -- message_id is left empty: the worker derives it from the delivery id and MAIL_FROM's domain.
  insert into deliveries (id, invoice_id, kind, slot_at, message_id, payment_id)
  values (new_id('dlv'), inv.id, 'partial_payment', clock_timestamp(), '', pay.id)
  on conflict do nothing
  returning id into inserted;
  if inserted is not null then
    -- What remained once this transaction's payments were applied: the email says that, not
    -- what remains whenever the worker gets to it.
    insert into outbox (job_name, job_id, payload)
    values ('invoice.partial_payment', 'invoice.partial_payment-' || inv.id || '-' || inserted,
            jsonb_build_object('invoiceId', inv.id, 'deliveryId', inserted, 'paymentId', pay.id,
                               'remainingAtomic', greatest(inv.amount_atomic - inv.amount_paid_atomic, 0)::text))
    on conflict (job_id) do nothing;
  end if;
  return null;
end;
$$;

-- Down Migration
create or replace function enqueue_partial_payment_email() returns trigger language plpgsql as $$
declare
  pay record;
  inv record;
  inserted text;
begin
  select p.id, p.invoice_id, p.status, p.outcome into pay from payments p where p.id = new.id;
  if pay.invoice_id is null or pay.status <> 'confirmed' or pay.outcome is distinct from 'applied' then
    return null;
  end if;
  select i.id, i.status, i.amount_atomic, i.amount_paid_atomic into inv from invoices i where i.id = pay.invoice_id;
  if inv.status not in ('open', 'overdue') or inv.amount_atomic is null then
    return null;
  end if;
  insert into deliveries (id, invoice_id, kind, slot_at, message_id, payment_id)
  values (new_id('dlv'), inv.id, 'partial_payment', clock_timestamp(), '', pay.id)
  on conflict do nothing
  returning id into inserted;
  if inserted is not null then
    insert into outbox (job_name, job_id, payload)
    values ('invoice.partial_payment', 'invoice.partial_payment-' || inv.id || '-' || inserted,
            jsonb_build_object('invoiceId', inv.id, 'deliveryId', inserted, 'paymentId', pay.id,
                               'remainingAtomic', greatest(inv.amount_atomic - inv.amount_paid_atomic, 0)::text))
    on conflict (job_id) do nothing;
  end if;
  return null;
end;
$$;
drop function dust_floor_atomic(integer);
