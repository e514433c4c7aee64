-- Up Migration

-- What a chain cursor is a cursor of (docs/payments.md, "The watcher"): the hash of the chain's
-- block 0, so a chain started over (a new local chain) is told from a node that lags; and the
-- set it was scanned for (environment, fee proxy, fee address, token contracts), so a worker
-- configured with another set neither moves it nor trusts it silently.
alter table chain_cursors add column genesis_hash text, add column scanned_for jsonb;

-- Down Migration

alter table chain_cursors drop column scanned_for, drop column genesis_hash;
