-- Up Migration

-- Subscriptions pulled on-chain by the SubscriptionManager contract (issue 26, docs/subscriptions.md).
-- A subscription is made only by the watcher's sight of a confirmed Subscribed event whose terms
-- equal those of a checkout the service made; every column below is then filled from the chain.
alter table subscriptions
  add column subscriber_address text check (subscriber_address ~ '^0x[0-9a-fA-F]{40}$'),
  add column payee_address text check (payee_address ~ '^0x[0-9a-fA-F]{40}$'),
  add column token_address text,
  add column token_decimals integer,
  add column fee_address text,
  add column operator_address text,
  -- The last period index the contract charged (0: the subscribe call's own period).
  add column last_charged_period integer not null default 0,
  add column canceled_at timestamptz,
  -- Who canceled: the customer on-chain, the merchant over the API, or dunning after the last attempt.
  add column canceled_by text check (canceled_by in ('customer', 'merchant', 'dunning')),
  -- When the contract saw the cancel (null until the Canceled event is confirmed).
  add column onchain_canceled_at timestamptz,
  add column ended_at timestamptz,
  add column checkout_reference text unique check (checkout_reference ~ '^0x[0-9a-f]{64}$');
alter table subscriptions add constraint subscriptions_status_check
  check (status in ('active', 'past_due', 'canceled', 'ended'));
-- One row per on-chain subscription (the sandbox's contract-less rows name the zero address).
create unique index subscriptions_onchain_idx on subscriptions (chain_id, lower(contract_address), onchain_id)
  where contract_address <> '0x0000000000000000000000000000000000000000';
create index subscriptions_due_idx on subscriptions (next_charge_at) where status in ('active', 'past_due');
create index subscriptions_customer_idx on subscriptions (account_id, environment, customer_id);

-- A period's invoice: which period of its subscription it bills (0: the subscribe call's).
alter table invoices add column period_index integer check (period_index >= 0);
create unique index invoices_subscription_period_idx on invoices (subscription_id, period_index)
  where subscription_id is not null and period_index is not null;

-- A subscription checkout (POST /pay/<link id>/subscribe): the terms the page asks the wallet to
-- subscribe with, and the first period's invoice, which the subscribe call's transfers pay.
create table subscription_checkouts (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  payment_link_id text not null references payment_links (id),
  price_id text not null references prices (id),
  customer_id text not null references customers (id),
  invoice_id text not null unique references invoices (id),
  checkout_reference text not null unique check (checkout_reference ~ '^0x[0-9a-f]{64}$'),
  chain_id integer not null,
  contract_address text not null check (contract_address ~ '^0x[0-9a-fA-F]{40}$'),
  payee_address text not null check (payee_address ~ '^0x[0-9a-fA-F]{40}$'),
  token_address text not null check (token_address ~ '^0x[0-9a-fA-F]{40}$'),
  amount_atomic numeric(78, 0) not null check (amount_atomic > 0),
  period_seconds integer not null check (period_seconds > 0),
  fee_bps integer not null check (fee_bps between 0 and 1000),
  fee_address text not null check (fee_address ~ '^0x[0-9a-fA-F]{40}$'),
  operator_address text not null check (operator_address ~ '^0x[0-9a-fA-F]{40}$'),
  ends_at timestamptz,
  subscription_id text unique references subscriptions (id),
  created_at timestamptz not null default now()
);
create index subscription_checkouts_link_idx on subscription_checkouts (payment_link_id);

-- The subscription contract's legs: 'subscribe' (the first period, paid by the subscribe call) and
-- 'charge' (a later period, charged by the relayer).
alter table payments drop constraint payments_kind_check;
alter table payments add constraint payments_kind_check check (kind in ('proxy', 'transfer', 'subscribe', 'charge'));

-- Down Migration
alter table payments drop constraint payments_kind_check;
delete from payments where kind in ('subscribe', 'charge');
alter table payments add constraint payments_kind_check check (kind in ('proxy', 'transfer'));
drop table subscription_checkouts;
drop index invoices_subscription_period_idx;
alter table invoices drop column period_index;
drop index subscriptions_customer_idx;
drop index subscriptions_due_idx;
drop index subscriptions_onchain_idx;
alter table subscriptions drop constraint subscriptions_status_check;
alter table subscriptions
  drop column subscriber_address, drop column payee_address, drop column token_address,
  drop column token_decimals, drop column fee_address, drop column operator_address,
  drop column last_charged_period, drop column canceled_at, drop column canceled_by,
  drop column onchain_canceled_at, drop column ended_at, drop column checkout_reference;
