-- Up Migration

-- Every transaction the relayer signs (src/chain/relayer.ts), recorded before it is broadcast: a
-- process that dies after signing finds it here and broadcasts it again (or learns it was mined)
-- rather than using a new nonce. One nonce sequence per (chain_id, from_address), serialised across
-- processes by a session advisory lock (src/db/relayer-transactions.ts). A nonce may carry several
-- rows: the first, and each replacement with higher fees (replaces_id) of one stuck too long.
-- No key material: raw_tx is the signed transaction, public once broadcast.
create table relayer_transactions (
  id bigint generated always as identity primary key,
  chain_id integer not null,
  -- lower-case hex
  from_address text not null,
  nonce bigint not null check (nonce >= 0),
  tx_hash text not null unique,
  raw_tx text not null,
  purpose text not null check (purpose in ('charge', 'cancel')),
  -- What the transaction does, so a second request for it finds this one: charge:<contract>:<id>:<period>, cancel:<contract>:<id>.
  subject text not null,
  contract_address text not null,
  gas_limit numeric(78, 0) not null,
  max_fee_per_gas numeric(78, 0) not null,
  max_priority_fee_per_gas numeric(78, 0) not null,
  -- pending: signed, recorded, maybe broadcast; replaced: a later row of its nonce has higher fees;
  -- mined / reverted: its receipt; dropped: another transaction of its nonce was mined;
  -- failed: refused by the node before it entered any pool (its nonce was never used).
  status text not null default 'pending' check (status in ('pending', 'replaced', 'mined', 'reverted', 'dropped', 'failed')),
  replaces_id bigint references relayer_transactions (id),
  -- The chain head when it was signed: stuck is measured from here.
  sent_at_block bigint not null,
  broadcasts integer not null default 0,
  mined_block bigint,
  -- Why it failed, in the node's words (never key material).
  error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create index relayer_transactions_sequence on relayer_transactions (chain_id, from_address, nonce);
create index relayer_transactions_open on relayer_transactions (chain_id, from_address, nonce) where status in ('pending', 'replaced');
create index relayer_transactions_subject on relayer_transactions (chain_id, subject);

-- Down Migration

drop table relayer_transactions;
