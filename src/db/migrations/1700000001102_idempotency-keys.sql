-- Up Migration

-- Idempotency-Key on POST (Stripe's and the IETF draft's semantics): the first request's response
-- per (account, environment, key), replayed to retries for 24 hours, then pruned by the worker's
-- `idempotency.prune` job. response_status is null while the first request runs; locked_until
-- bounds how long a request that died mid-way keeps its key "in use".
create table idempotency_keys (
  account_id text not null references accounts (id),
  environment environment not null,
  key text not null,
  -- sha256 of the method, the path and the canonical JSON body
  fingerprint bytea not null,
  response_status integer,
  response_content_type text,
  response_body text,
  locked_until timestamptz,
  created_at timestamptz not null default now(),
  primary key (account_id, environment, key)
);
create index idempotency_keys_created_idx on idempotency_keys (created_at);

-- Down Migration
drop table idempotency_keys;
