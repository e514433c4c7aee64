-- Up Migration

-- One schema shared by the API and the workers. Every business row carries its account and its
-- environment; lookups always filter on both, so an object of another account or of the other
-- environment is simply not found (404), never forbidden (403).

create type environment as enum ('sandbox', 'live');
create type invoice_status as enum ('draft', 'open', 'paid', 'overdue', 'void');

create table accounts (
  id text primary key,
  name text not null,
  email text,
  time_zone text not null default 'UTC',
  platform_fee_bps integer not null default 50 check (platform_fee_bps between 0 and 10000),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table credentials (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  name text not null,
  permission text not null check (permission in ('full', 'read_only')),
  -- sha256 of the whole secret; the secret itself is never stored.
  secret_hash bytea not null unique,
  secret_last4 text not null,
  revoked_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index credentials_account_idx on credentials (account_id, environment);

create table customers (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  email text not null,
  name text,
  time_zone text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index customers_email_idx on customers (account_id, environment, lower(email));

create table products (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  name text not null,
  description text,
  active boolean not null default true,
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index products_account_idx on products (account_id, environment);

create table prices (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  product_id text not null references products (id),
  amount numeric not null check (amount > 0),
  amount_atomic numeric(78, 0) not null,
  currency text not null,
  network text not null,
  chain_id integer not null,
  token_address text not null,
  token_decimals integer not null,
  cadence text not null,
  interval_seconds integer,
  active boolean not null default true,
  metadata jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index prices_product_idx on prices (product_id);

-- Per account and environment counters for the human readable invoice numbers.
create table invoice_counters (
  account_id text not null references accounts (id),
  environment environment not null,
  last_number integer not null default 0,
  primary key (account_id, environment)
);

create table subscriptions (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  customer_id text not null references customers (id),
  price_id text not null references prices (id),
  status text not null,
  mode text not null,
  amount numeric not null,
  amount_atomic numeric(78, 0) not null,
  currency text not null,
  cadence text not null,
  interval_seconds integer,
  network text not null,
  chain_id integer not null,
  contract_address text not null,
  onchain_id text not null,
  platform_fee_bps integer not null,
  started_at timestamptz not null,
  current_period_start timestamptz not null,
  next_charge_at timestamptz,
  ends_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index subscriptions_price_idx on subscriptions (price_id);

create table invoices (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  customer_id text not null references customers (id),
  subscription_id text references subscriptions (id),
  code text,
  reference text not null unique,
  status invoice_status not null default 'draft',
  amount numeric check (amount > 0),
  amount_atomic numeric(78, 0),
  fee_atomic numeric(78, 0),
  currency text not null,
  network text not null,
  chain_id integer not null,
  token_address text not null,
  token_decimals integer not null,
  period_start timestamptz,
  period_end timestamptz,
  attempt_count integer not null default 0,
  next_attempt_at timestamptz,
  paid_at timestamptz,
  sent_at timestamptz,
  reminders_enabled boolean not null default true,
  last_reminder_at timestamptz,
  failure_code text,
  failure_message text,
  metadata jsonb not null default '{}',
  -- Input-only fields: stored and printed on the PDF, not part of the Invoice object.
  due_at timestamptz,
  memo text,
  footer text,
  tax_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (account_id, environment, code)
);
create index invoices_account_idx on invoices (account_id, environment);
create index invoices_reminder_candidates_idx on invoices (status) where status in ('open', 'overdue');

create table invoice_line_items (
  invoice_id text not null references invoices (id) on delete cascade,
  position integer not null,
  description text not null,
  quantity integer not null check (quantity > 0),
  unit_amount numeric not null check (unit_amount >= 0),
  primary key (invoice_id, position)
);

create table payment_links (
  id text primary key,
  account_id text not null references accounts (id),
  environment environment not null,
  name text not null,
  type text not null check (type in ('fixed_price', 'custom_amount')),
  status text not null default 'active' check (status in ('active', 'inactive')),
  price_id text references prices (id),
  currency text not null,
  network text not null,
  chain_id integer not null,
  token_decimals integer not null,
  min_amount numeric,
  max_amount numeric,
  preset_amount numeric,
  collect_email boolean not null default false,
  collect_name boolean not null default false,
  collect_phone boolean not null default false,
  collect_address boolean not null default false,
  max_payments integer,
  after_completion text not null default 'message' check (after_completion in ('message', 'redirect')),
  confirmation_message text,
  redirect_url text,
  fee_payer text not null default 'merchant' check (fee_payer in ('merchant', 'customer')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index payment_links_account_idx on payment_links (account_id, environment, created_at);

-- "restrict": a link that took a payment can never be deleted, whatever the code path.
create table payment_link_payments (
  id text primary key,
  payment_link_id text not null references payment_links (id) on delete restrict,
  amount numeric not null,
  amount_atomic numeric(78, 0) not null,
  customer_email text,
  tx_hash text not null,
  created_at timestamptz not null default now()
);
create index payment_link_payments_link_idx on payment_link_payments (payment_link_id);

-- Every email the service sends or means to send. The unique key makes a reminder slot or a
-- send a single row however many times its job runs.
create table deliveries (
  id text primary key,
  invoice_id text not null references invoices (id),
  kind text not null check (kind in ('invoice', 'reminder_before', 'reminder_after')),
  -- the send's own instant for 'invoice', the planned slot for reminders
  slot_at timestamptz not null,
  status text not null default 'pending' check (status in ('pending', 'retrying', 'sent', 'failed')),
  attempt integer not null default 0,
  message_id text not null,
  error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  sent_at timestamptz,
  unique (invoice_id, kind, slot_at)
);

-- Transactional outbox: written in the same transaction as the state change that needs a job;
-- enqueued_at is set once BullMQ holds the job.
create table outbox (
  id bigserial primary key,
  job_name text not null,
  job_id text not null unique,
  payload jsonb not null,
  created_at timestamptz not null default now(),
  enqueued_at timestamptz
);
create index outbox_pending_idx on outbox (id) where enqueued_at is null;

-- Down Migration
drop table outbox, deliveries, payment_link_payments, payment_links, invoice_line_items, invoices,
  subscriptions, invoice_counters, prices, products, customers, credentials, accounts;
drop type invoice_status, environment;
