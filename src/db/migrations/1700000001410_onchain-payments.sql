-- Up Migration

-- On-chain payments (docs/payments.md). The merchant's settlement address is per environment
-- (a sandbox address is a test-chain address); a sent invoice keeps the address, the salt and the
-- payment reference it was sent with, so changing the address later never redirects it.
create table settlement_addresses (
  account_id text not null references accounts (id),
  environment environment not null,
  -- EIP-55 checksummed; compared in lower case.
  address text not null check (address ~ '^0x[0-9a-fA-F]{40}$'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (account_id, environment)
);
-- One account per address and environment: a payment to an address is that account's, never
-- another tenant's (PATCH /v1/account refuses an address another account holds).
create unique index settlement_addresses_address_idx on settlement_addresses (environment, lower(address));
insert into settlement_addresses (account_id, environment, address)
  select distinct on (e.environment, lower(a.settlement_address)) a.id, e.environment, a.settlement_address
  from accounts a cross join (values ('sandbox'::environment), ('live'::environment)) as e (environment)
  where a.settlement_address is not null
  order by e.environment, lower(a.settlement_address), a.created_at, a.id;
alter table accounts drop column settlement_address;

alter table invoices
  add column settlement_address text check (settlement_address ~ '^0x[0-9a-fA-F]{40}$'),
  add column reference_salt text,
  -- 0x + 16 hex: last 8 bytes of keccak256(lower(id + salt + settlement_address)), fixed at send.
  add column payment_reference text check (payment_reference ~ '^0x[0-9a-f]{16}$'),
  -- keccak256(reference bytes): the indexed topic of the proxy's event, for the detector's lookup.
  add column payment_reference_topic text,
  -- The account's fee rate when the invoice was made: the fee of what remains is computed with it.
  add column fee_bps integer check (fee_bps between 0 and 10000),
  -- What applied on-chain payments add up to (atomic); above amount_atomic on an over-payment.
  add column amount_paid_atomic numeric(78, 0) not null default 0 check (amount_paid_atomic >= 0);
update invoices i set fee_bps = a.platform_fee_bps from accounts a where a.id = i.account_id;
create unique index invoices_payment_reference_idx on invoices (payment_reference);
create unique index invoices_payment_reference_topic_idx on invoices (payment_reference_topic);
-- A plain transfer's candidates: the open invoices sent to that address on that chain.
create index invoices_open_by_address_idx on invoices (chain_id, lower(settlement_address))
  where status in ('open', 'overdue') and settlement_address is not null;

-- One row per log: (chain_id, tx_hash, log_index) is unique, so a repeated scan, a worker killed
-- mid-run or two workers at once never make a second row (nor, since events are written only
-- for the row a statement inserted or changed, a second event).
create table payments (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  invoice_id text references invoices (id),
  chain_id integer not null,
  network text not null,
  tx_hash text not null check (tx_hash ~ '^0x[0-9a-f]{64}$'),
  log_index integer not null,
  block_number bigint not null,
  block_hash text not null,
  block_time timestamptz,
  token_address text not null,
  from_address text,
  to_address text not null,
  -- proxy: the merchant's share (the call's amount); transfer: the value.
  amount_atomic numeric(78, 0) not null,
  -- proxy: the call's feeAmount; transfer: 0 (no fee is collected on-chain).
  fee_atomic numeric(78, 0) not null,
  fee_address text,
  -- The fee the account's rate asks of a payment of this size (proxy payments only).
  fee_expected_atomic numeric(78, 0),
  payment_reference text,
  kind text not null check (kind in ('proxy', 'transfer')),
  status text not null check (status in ('pending', 'confirmed', 'removed')),
  outcome text check (outcome in ('applied', 'invoice_already_paid', 'invoice_void', 'unmatched')),
  created_at timestamptz not null default clock_timestamp(),
  confirmed_at timestamptz,
  removed_at timestamptz,
  updated_at timestamptz not null default clock_timestamp(),
  unique (chain_id, tx_hash, log_index),
  check ((status = 'confirmed') = (outcome is not null))
);
create index payments_list_idx on payments (account_id, environment, created_at desc, id desc);
create index payments_invoice_idx on payments (invoice_id, created_at) where invoice_id is not null;
create index payments_unmatched_idx on payments (account_id, environment, created_at desc) where outcome = 'unmatched';
create index payments_pending_idx on payments (chain_id, block_number) where status = 'pending';

-- Where each watched chain's scan stands: the last block whose payments are final, its hash (a
-- different hash at that height later means a reorg under the cursor), recent checkpoints to find
-- where such a reorg forked, and the head last seen (confirmations and lag are read from it).
create table chain_cursors (
  chain_id integer primary key,
  block_number bigint not null,
  block_hash text,
  block_time timestamptz,
  checkpoints jsonb not null default '[]',
  head_block bigint,
  safe_block bigint,
  head_seen_at timestamptz,
  updated_at timestamptz not null default clock_timestamp()
);

-- Every outbox row wakes the workers' relay at commit, whoever wrote it (emit_event, the receipt
-- trigger, the API): one statement-level trigger instead of a NOTIFY in each writer.
create function notify_outbox_pending() returns trigger language plpgsql as $$
begin
  perform pg_notify('outbox_pending', '');
  return null;
end;
$$;
create trigger outbox_notify_pending after insert on outbox for each statement execute function notify_outbox_pending();

-- Down Migration
drop trigger outbox_notify_pending on outbox;
drop function notify_outbox_pending();
drop table chain_cursors;
drop table payments;
drop index invoices_open_by_address_idx;
drop index invoices_payment_reference_topic_idx;
drop index invoices_payment_reference_idx;
alter table invoices drop column amount_paid_atomic, drop column fee_bps, drop column payment_reference_topic,
  drop column payment_reference, drop column reference_salt, drop column settlement_address;
alter table accounts add column settlement_address text check (settlement_address ~ '^0x[0-9a-fA-F]{40}$');
update accounts a set settlement_address = s.address from settlement_addresses s where s.account_id = a.id and s.environment = 'live';
drop table settlement_addresses;
