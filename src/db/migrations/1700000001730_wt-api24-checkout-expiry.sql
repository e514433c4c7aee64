-- Up Migration

-- A payment link's checkout (POST /pay/<link id>/checkout) is made by an anonymous visitor: it
-- is marked by the time it expires, and a checkout that is still unpaid then, with no payment
-- seen at all, is voided by the worker's `checkouts.expire` job (docs/payments.md). Invoices
-- made otherwise keep null. Checkouts made before this migration stay unmarked.
alter table invoices add column checkout_expires_at timestamptz;
-- What the expiry job looks for; what the checkout limits count (a link's, an email's recent
-- unpaid checkouts) goes by invoices_payment_link_idx and the customer index.
create index invoices_checkout_expiry_idx on invoices (checkout_expires_at)
  where checkout_expires_at is not null and status in ('open', 'overdue');

-- Down Migration
drop index invoices_checkout_expiry_idx;
alter table invoices drop column checkout_expires_at;
