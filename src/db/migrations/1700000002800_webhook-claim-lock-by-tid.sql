-- Up Migration

-- The webhook claim locks its candidates by their ctid (src/db/webhook-deliveries.ts). Written in
-- the claim itself, that lock was planned from the table's statistics: on statistics older than a
-- burst (autovacuum analyses a table a minute or more after it grew) the planner read every
-- pending delivery with a bitmap scan and kept the rows whose ctid was a candidate, so a claim's
-- cost grew with the backlog (2,000 pending read to lock 100, measured with EXPLAIN ANALYZE). With
-- every other access path off, a TID scan is the plan, whatever the statistics say. Volatile (it
-- locks): it reads with a snapshot of its own, so a candidate updated since the claim's snapshot
-- is not found at its old ctid and is left to whoever changed it. `rows 1`: the claim joins the
-- ids it returns back to the deliveries, their events and endpoints, and with the default
-- estimate of a set-returning function (1,000 rows) the planner hashed all three tables whole for
-- a claim of 100; a claim is at most two batches, joined by primary key, one probe each.
create function webhook_deliveries_lock_due(p_ctids tid[], p_limit int)
returns table (id text)
language sql volatile
rows 1
set enable_bitmapscan = off
set enable_indexscan = off
set enable_indexonlyscan = off
set enable_seqscan = off
as $$
  select d.id
  from webhook_deliveries d
  where d.ctid = any(p_ctids)
    and d.status = 'pending' and coalesce(d.next_attempt_at, d.created_at) <= clock_timestamp()
  order by coalesce(d.next_attempt_at, d.created_at)
  limit p_limit
  for update of d skip locked
$$;

-- Down Migration

drop function webhook_deliveries_lock_due(tid[], int);
