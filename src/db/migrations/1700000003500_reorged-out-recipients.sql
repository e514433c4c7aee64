-- Up Migration

-- The watcher asks for transfers to the recipients of payments reorged out in the last day
-- (src/db/payments.ts, recipientsToRescan): the same transaction broadcast again lands in a later
-- block, and when its address is no longer a settlement address nor any open invoice's, nothing
-- else would ask for it, and the payment stayed removed with the money at the merchant's. Such
-- rows are rare; this keeps the look at them one small index read per run.
create index payments_reorged_out_idx on payments (chain_id, reorged_out_at) where reorged_out_at is not null and status = 'removed';

-- Down Migration

drop index payments_reorged_out_idx;
