-- Up Migration

-- The webhook claim's candidates (src/db/webhook-deliveries.ts): the oldest due pending
-- deliveries, read in the order of webhook_deliveries_due_idx and stopped after p_scan, whatever
-- the table's statistics say. On statistics older than a burst (autovacuum analyses a table a
-- minute or more after it grew) the planner read every due delivery with a bitmap scan and sorted
-- them, at each claim, so a claim's cost grew with the backlog (14 ms of a 20 ms claim with 4,187
-- due, measured with auto_explain). An ordered index scan also marks the entries of dead row
-- versions as it passes them (each claim and each recording writes a new version), which a bitmap
-- scan never does. Stable: it reads with its caller's snapshot, so the ctids it returns are the
-- ones the claim then locks.
create function webhook_deliveries_due(p_skip_endpoints text[], p_scan int)
returns table (row_ctid tid, id text, endpoint_id text, due_at timestamptz)
language sql stable
set enable_bitmapscan = off
set enable_seqscan = off
set enable_sort = off
as $$
  select d.ctid, d.id, d.endpoint_id, coalesce(d.next_attempt_at, d.created_at)
  from webhook_deliveries d
  where d.status = 'pending' and coalesce(d.next_attempt_at, d.created_at) <= now()
    and d.endpoint_id <> all(p_skip_endpoints)
  order by coalesce(d.next_attempt_at, d.created_at)
  limit p_scan
$$;

-- Down Migration

drop function webhook_deliveries_due(text[], int);
