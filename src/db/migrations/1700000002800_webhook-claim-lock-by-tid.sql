-- Up Migration

-- The webhook claim's lease (src/db/webhook-deliveries.ts): its candidates, read by
-- webhook_deliveries_due, locked by their ctid and leased, with a TID scan at each step whatever
-- the table's statistics say. Written in the claim itself, both steps were planned from the
-- statistics, which lag a burst (autovacuum analyses a table a minute or more after it grew): the
-- lock read every pending delivery with a bitmap scan and kept the candidates' ctids (2,000
-- pending read to lock 100, EXPLAIN ANALYZE), and on statistics taken while the table was empty
-- the lease's join back by id walked every delivery once per locked row (a review measured 530 ms
-- for 100 of 20,000 with autovacuum off; here the lease joins nothing back).
-- With every other access path off, the TID scan is the plan. Volatile (it locks and writes): it
-- reads with a snapshot of its own, so a candidate changed since the claim read it is not found at
-- its old ctid, or fails the re-check after the lock, and is skipped (due again, a later claim
-- takes it). `rows 1`: the claim joins what it returns to the endpoints and events by primary key.
create function webhook_deliveries_lease_due(p_ctids tid[], p_limit int, p_lease_id uuid, p_lease_ms double precision)
returns table (id text, event_id text, endpoint_id text, attempt_count int, created_at timestamptz)
language sql volatile
rows 1
set enable_bitmapscan = off
set enable_indexscan = off
set enable_indexonlyscan = off
set enable_seqscan = off
as $$
  with picked as materialized (
    select d.ctid
    from webhook_deliveries d
    where d.ctid = any(p_ctids)
      and d.status = 'pending' and coalesce(d.next_attempt_at, d.created_at) <= clock_timestamp()
    order by coalesce(d.next_attempt_at, d.created_at)
    limit p_limit
    for update of d skip locked
  )
  update webhook_deliveries d
  set next_attempt_at = clock_timestamp() + make_interval(secs => p_lease_ms / 1000), lease_id = p_lease_id
  where d.ctid = any(array(select picked.ctid from picked))
  returning d.id, d.event_id, d.endpoint_id, d.attempt_count, d.created_at
$$;

-- Down Migration

drop function webhook_deliveries_lease_due(tid[], int, uuid, double precision);
