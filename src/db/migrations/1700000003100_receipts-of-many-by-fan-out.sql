-- Up Migration

-- The receipts of an UPDATE that pays many invoices at once (a range of the payment detector:
-- thousands) are owed by fan-out rows, not written one by one in that transaction (issue 28,
-- bench:chain: 10,000 receipt deliveries and outbox rows were about 0.85 s of a range's 7.5 s,
-- inside the transaction that holds the chain's cursor). The UPDATE's transaction writes one
-- `invoice.receipts` outbox row per 500 invoices that turned paid; the job writes each one's
-- delivery and `invoice.receipt` outbox row (owe_receipts, the same rows the trigger writes for a
-- few). Owed in the same transaction as the status change either way: a rolled-back payment owes
-- nothing, a committed one owes its receipt even if every process dies after the commit.

-- The receipt of each of these invoices: its delivery (once per invoice: the unique receipt
-- delivery) and its outbox job. message_id is left empty: the worker derives it from the delivery
-- id and MAIL_FROM's domain (mail/message-id.ts), which the database does not know. Running it
-- again owes nothing twice. Returns how many it owed now.
create function owe_receipts(p_invoice_ids text[]) returns integer language plpgsql as $$
declare
  owed integer;
begin
  with d as (
    insert into deliveries (id, invoice_id, kind, slot_at, message_id)
    select new_id('dlv'), i.id, 'receipt', coalesce(i.paid_at, now()), ''
    from invoices i
    where i.id = any(p_invoice_ids)
    on conflict do nothing
    returning id, invoice_id
  )
  insert into outbox (job_name, job_id, payload)
  select 'invoice.receipt', 'invoice.receipt-' || d.invoice_id || '-' || d.id, jsonb_build_object('invoiceId', d.invoice_id, 'deliveryId', d.id)
  from d
  on conflict (job_id) do nothing;
  get diagnostics owed = row_count;
  return owed;
end;
$$;

-- Up to 100 invoices turned paid by one statement (the API, the sandbox's simulated payments, an
-- operator's SQL, a range with few payments) owe their receipts at once, as before: the sandbox
-- hands its receipt job to the queue right after its commit. More owe them by fan-out rows.
create or replace function invoices_enqueue_receipts() returns trigger language plpgsql as $$
declare
  paid text[];
begin
  select array_agg(n.id order by n.id) into paid
  from new_rows n join old_rows o on o.id = n.id
  where n.status = 'paid' and o.status is distinct from 'paid';
  if paid is null then
    return null;
  end if;
  if cardinality(paid) <= 100 then
    perform owe_receipts(paid);
    return null;
  end if;
  insert into outbox (job_name, job_id, payload)
  select 'invoice.receipts', 'invoice.receipts-' || b.id, jsonb_build_object('batchId', b.id, 'invoiceIds', to_jsonb(paid[b.lo:b.lo + 499]))
  from (select new_id('rcb') as id, lo from generate_series(1, cardinality(paid), 500) lo) b;
  return null;
end;
$$;

-- Down Migration

-- The receipts still owed by fan-out rows (not handed over, or handed over and not run yet: owing
-- again owes nothing twice) are written out first: the older version knows no `invoice.receipts`.
select owe_receipts(array(select jsonb_array_elements_text(o.payload->'invoiceIds'))) from outbox o where o.job_name = 'invoice.receipts';
delete from outbox where job_name = 'invoice.receipts' and enqueued_at is null;
create or replace function invoices_enqueue_receipts() returns trigger language plpgsql as $$
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
drop function owe_receipts(text[]);
