-- The database's identity: a Redis prefix is claimed for exactly one database (see
-- src/queue/prefix-claim.ts). One row at most, created on first start, not by this migration:
-- a database cloned from a template (tests) or restored elsewhere gets an identity of its own
-- when its first process starts, unless the row came along.
create table deployment (
  singleton boolean primary key default true check (singleton),
  id uuid not null default gen_random_uuid(),
  created_at timestamptz not null default now()
);

-- Where a sent email went: 'smtp' (SMTP_URL, live), 'sandbox_smtp' (SANDBOX_SMTP_URL), or
-- 'outbox' (an .eml file); destination is the SMTP server (no credentials) or the file's path.
alter table deliveries
  add column transport text check (transport in ('smtp', 'sandbox_smtp', 'outbox')),
  add column destination text;
