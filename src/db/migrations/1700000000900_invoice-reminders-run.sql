-- Up Migration

-- "Reminders run for this invoice", once in SQL: the rule remindersShouldRun of
-- src/domain/invoice-rules.ts (test/integration/rules-parity.test.ts checks that both agree for
-- every status and flag). Used by the stop trigger below and by the queries of src/db/reminders.ts.
-- A single-select SQL function, immutable: the planner inlines it into the calling query.
create function invoice_reminders_run(status invoice_status, reminders_enabled boolean, due_at timestamptz)
  returns boolean language sql immutable parallel safe
  return status in ('open', 'overdue') and reminders_enabled and due_at is not null;

-- The stop notification now fires exactly when the rule turns from true to false.
create or replace function notify_invoice_reminders_stop() returns trigger language plpgsql as $$
begin
  if invoice_reminders_run(old.status, old.reminders_enabled, old.due_at)
     and not invoice_reminders_run(new.status, new.reminders_enabled, new.due_at) then
    perform pg_notify('invoice_reminders_stop', new.id);
  end if;
  return new;
end;
$$;

-- Down Migration
create or replace function notify_invoice_reminders_stop() returns trigger language plpgsql as $$
begin
  if (old.status in ('open', 'overdue') and old.reminders_enabled)
     and not (new.status in ('open', 'overdue') and new.reminders_enabled) then
    perform pg_notify('invoice_reminders_stop', new.id);
  end if;
  return new;
end;
$$;
drop function invoice_reminders_run(invoice_status, boolean, timestamptz);
