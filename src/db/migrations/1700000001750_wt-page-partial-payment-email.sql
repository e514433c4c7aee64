-- Up Migration

-- The acknowledgement of a partial payment: when a confirmed payment is applied to an invoice and
-- the invoice stays open, the customer is owed one short email (what arrived, what remains, the
-- link). Like the receipt (migration 1700000001201) the database writes the delivery and its
-- outbox row in the transaction that applies the payment, whatever path did it (the detector,
-- POST /v1/payments/{id}/apply), so it is neither lost nor sent twice: one delivery per payment,
-- enforced by the unique index.
--
-- A deferred constraint trigger: it runs at commit, when the transaction has also written the
-- invoice's balance and status (the writers update the payment row first). A payment that paid
-- the invoice in full, or whose invoice was paid in full by the same transaction, gets none: the
-- receipt lists it.

alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after', 'receipt', 'partial_payment'));
-- The payment a partial_payment delivery acknowledges (null for every other kind).
alter table deliveries add column payment_id text;
create unique index deliveries_one_partial_payment_idx on deliveries (payment_id) where kind = 'partial_payment';

create function enqueue_partial_payment_email() returns trigger language plpgsql as $$
declare
  pay record;
  inv record;
  inserted text;
begin
  -- Deferred: NEW is the row as it was when the event was queued; read it as it is now.
  select p.id, p.invoice_id, p.status, p.outcome into pay from payments p where p.id = new.id;
  if pay.invoice_id is null or pay.status <> 'confirmed' or pay.outcome is distinct from 'applied' then
    return null;
  end if;
  select i.id, i.status, i.amount_atomic, i.amount_paid_atomic into inv from invoices i where i.id = pay.invoice_id;
  if inv.status not in ('open', 'overdue') or inv.amount_atomic is null then
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

create constraint trigger payments_enqueue_partial_payment_email
  after insert or update of status, outcome, invoice_id on payments
  deferrable initially deferred
  for each row
  when (new.status = 'confirmed' and new.outcome = 'applied' and new.invoice_id is not null)
  execute function enqueue_partial_payment_email();

-- Down Migration
drop trigger payments_enqueue_partial_payment_email on payments;
drop function enqueue_partial_payment_email();
drop index deliveries_one_partial_payment_idx;
delete from deliveries where kind = 'partial_payment';
alter table deliveries drop column payment_id;
alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after', 'receipt'));
