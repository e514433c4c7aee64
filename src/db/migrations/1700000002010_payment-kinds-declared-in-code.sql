-- Up Migration

-- A payment's kind is the name of a kind of chain log (src/chain/kinds/index.ts, the one list):
-- a new kind is a module and its registration there, not a schema change too. Only the detector
-- writes payment rows, each with the name of the kind that observed it; the API's enum of `kind`
-- is derived from the same list. What stays checked here: a kind is a plain name.
alter table payments drop constraint payments_kind_check;
alter table payments add constraint payments_kind_name check (kind ~ '^[a-z][a-z0-9_]*$');

-- Down Migration

alter table payments drop constraint payments_kind_name;
alter table payments add constraint payments_kind_check check (kind in ('proxy', 'transfer', 'subscribe', 'charge'));
