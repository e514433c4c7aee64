-- Up Migration

-- Tells the workers at once when an invoice stops qualifying for reminders, whoever changed it:
-- the API, or another component writing `update invoices set status = 'paid' ...` straight into
-- the table. Workers LISTEN on this channel and remove the invoice's schedulers. A missed
-- notification is covered by the reminder job's own re-read and by the reconciler.
create function notify_invoice_reminders_stop() returns trigger language plpgsql as $$
begin
  if (old.status in ('open', 'overdue') and old.reminders_enabled)
     and not (new.status in ('open', 'overdue') and new.reminders_enabled) then
    perform pg_notify('invoice_reminders_stop', new.id);
  end if;
  return new;
end;
$$;

create trigger invoices_reminders_stop
  after update of status, reminders_enabled on invoices
  for each row execute function notify_invoice_reminders_stop();

-- Down Migration
drop trigger invoices_reminders_stop on invoices;
drop function notify_invoice_reminders_stop();
