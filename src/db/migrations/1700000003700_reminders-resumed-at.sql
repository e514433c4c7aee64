-- Up Migration

-- When reminders were last turned on again after being off (POST /v1/invoices/{id}/reminders):
-- a slot before it passed while they were off, and its job, should it still run (it was already
-- due and waiting when "off" removed the schedule, and ran after "on"), sends nothing. "On"
-- resumes at the next slot, never with the missed ones (src/db/reminders.ts, lockIfRemindersRun).
alter table invoices add column reminders_resumed_at timestamptz;

-- Down Migration

alter table invoices drop column reminders_resumed_at;
