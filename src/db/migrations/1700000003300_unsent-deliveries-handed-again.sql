-- Up Migration

-- An email owed and not sent yet ('pending', or 'retrying' after a transient failure) whose job
-- the queue store lost (Redis flushed or restarted without persistence after the hand-over) would
-- wait for ever: its outbox row says handed over. The reconciler hands such a row over again once
-- its delivery has not moved for a while (src/db/outbox.ts, handUnsentAgain); the job id makes the
-- add a no-op while the job still exists. This index keeps the look at the unsent ones cheap.
create index deliveries_unsent_idx on deliveries (updated_at) where status in ('pending', 'retrying');

-- Down Migration

drop index deliveries_unsent_idx;
