-- Up Migration

-- A fan-out row (`invoice.receipts`, migration 1700000003100) is deleted by its job in the
-- statement that owes its receipts, so a row still there says its receipts may not be owed yet.
-- The reconciler owes those of rows handed over long ago (their job lost with Redis, or out of
-- attempts) or set aside by an older worker, and deletes them. This index keeps that look cheap:
-- it holds only the fan-out rows still there, a handful at any time.
create index outbox_fan_out_receipts_idx on outbox (id) where job_name = 'invoice.receipts';

-- Down Migration

drop index outbox_fan_out_receipts_idx;
