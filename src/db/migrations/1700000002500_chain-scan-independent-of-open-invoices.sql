-- Up Migration

-- A range's cost must not grow with the number of open invoices (issue 28).
-- A plain transfer settles only an open invoice of its address owing exactly its value
-- (matchTransfer): the detector locks those, found here by (address, remaining), instead of every
-- open invoice of the address.
create index invoices_open_by_remaining_idx on invoices (chain_id, lower(settlement_address), (amount_atomic - amount_paid_atomic))
  where status in ('open', 'overdue') and settlement_address is not null and checkout_expires_at is null;
-- Who an address belongs to when no settlement address names it: its latest invoice, read by one
-- index probe rather than every invoice ever sent to it.
create index invoices_by_address_sent_idx on invoices (chain_id, lower(settlement_address), sent_at desc, account_id)
  where settlement_address is not null;

-- Down Migration

drop index invoices_by_address_sent_idx;
drop index invoices_open_by_remaining_idx;
