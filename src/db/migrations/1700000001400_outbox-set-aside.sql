-- Up Migration
-- A row the relay cannot hand over whatever it retries (a job name the job catalogue does not
-- know: written by hand, or by a newer version rolled back) is set aside rather than left
-- pending: the relay reads the oldest pending rows first, so one such row would hold back every
-- later one for ever. failed_at and failed_reason say when and why; the row is kept for an
-- operator (clear both to hand it over again once the catalogue knows the job).
alter table outbox
  add column failed_at timestamptz,
  add column failed_reason text;
drop index outbox_pending_idx;
create index outbox_pending_idx on outbox (id) where enqueued_at is null and failed_at is null;

-- Down Migration
drop index outbox_pending_idx;
create index outbox_pending_idx on outbox (id) where enqueued_at is null;
alter table outbox drop column failed_at, drop column failed_reason;
