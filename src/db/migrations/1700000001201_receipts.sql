-- Up Migration

-- Receipts: when an invoice turns paid, by whatever path (the API, the payment detector, a
-- direct `update invoices set status = 'paid'`), the customer is owed one "payment received"
-- email. The trigger writes that delivery and its outbox row in the transaction that marks the
-- invoice paid, so the receipt can neither be lost (a crash after commit: the outbox relay hands
-- it over) nor sent twice (one receipt delivery per invoice, enforced by the unique index; the
-- delivery row makes a rerun of the job a no-op).

alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after', 'receipt'));
create unique index deliveries_one_receipt_idx on deliveries (invoice_id) where kind = 'receipt';

create function enqueue_invoice_receipt() returns trigger language plpgsql as $$
declare
  delivery_id text := 'dlv_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24);
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

create trigger invoices_enqueue_receipt
  after update of status on invoices
  for each row
  when (new.status = 'paid' and old.status is distinct from 'paid')
  execute function enqueue_invoice_receipt();

-- Down Migration
drop trigger invoices_enqueue_receipt on invoices;
drop function enqueue_invoice_receipt();
drop index deliveries_one_receipt_idx;
delete from deliveries where kind = 'receipt';
alter table deliveries drop constraint deliveries_kind_check;
alter table deliveries add constraint deliveries_kind_check
  check (kind in ('invoice', 'reminder_before', 'reminder_after'));
