-- Up Migration
-- Processes that place reminder schedulers (API and workers) say here how many reminder shards
-- they use (REMINDER_SHARDS), every RECONCILE_EVERY. While processes with different counts run
-- side by side (a rolling change), each count with a live member is honoured: a scheduler in
-- the shard of any live count is in place. Rows of stopped processes go stale; the reconciler
-- deletes them once the shards only they used are drained (see src/queue/reminder-placement.ts).
create table reminder_shard_members (
  member_id text primary key,
  shards integer not null check (shards between 1 and 1024),
  seen_at timestamptz not null default now()
);

-- Down Migration
drop table reminder_shard_members;
