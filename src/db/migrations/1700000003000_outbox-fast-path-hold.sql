-- Up Migration

-- A row its writer will hand to BullMQ itself right after commit (the API's fast path) is held
-- from the workers' relay until `held_until`: without the hold, the commit's NOTIFY woke every
-- worker's relay, which added the same job a second time (a no-op add, about 1 ms of the
-- database's work a send on the Postgres queue backend) and marked it again. The writer releases
-- the hold if its hand-over fails (src/queue/outbox-relay.ts); a writer that dies leaves the row
-- to the relay once the hold ends.
alter table outbox add column held_until timestamptz;

-- Only rows the relay may take at once wake it; a held row is the writer's to hand over. An insert
-- of no rows wakes no one either (the receipts trigger's `insert ... select` runs on every invoice
-- UPDATE and used to wake every worker's relay each time).
create or replace function notify_outbox_pending() returns trigger language plpgsql as $$
begin
  if exists (select 1 from new_rows where held_until is null) then
    perform pg_notify('outbox_pending', '');
  end if;
  return null;
end;
$$;
drop trigger outbox_notify_pending on outbox;
create trigger outbox_notify_pending after insert on outbox referencing new table as new_rows
  for each statement execute function notify_outbox_pending();

-- Down Migration

drop trigger outbox_notify_pending on outbox;
create or replace function notify_outbox_pending() returns trigger language plpgsql as $$
begin
  perform pg_notify('outbox_pending', '');
  return null;
end;
$$;
create trigger outbox_notify_pending after insert on outbox for each statement execute function notify_outbox_pending();
alter table outbox drop column held_until;
