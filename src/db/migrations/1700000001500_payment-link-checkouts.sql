-- Up Migration

-- A checkout: an invoice made by the payment page for one payment of a link (the payer chose the
-- amount and gave an email), paid on-chain like any invoice. "restrict", as for the simulated
-- payments: a link whose checkout was paid can never be deleted; the delete detaches the checkouts
-- nobody paid first (src/db/payment-links.ts).
alter table invoices add column payment_link_id text references payment_links (id) on delete restrict;
create index invoices_payment_link_idx on invoices (payment_link_id) where payment_link_id is not null;

-- "The payments of a link", once: its simulated payments (payment_link_payments) and its
-- checkouts that took a confirmed on-chain payment (paid, or some applied payment, i.e.
-- amount_paid_atomic > 0; the detector applies a payment only once it is confirmed). Read by the
-- link's payment count (API and page), max_payments and the delete guard.
create function payment_link_payment_count(link_id text) returns integer language sql stable parallel safe
  return (select count(*) from payment_link_payments p where p.payment_link_id = link_id)
    + (select count(*) from invoices i
         where i.payment_link_id = link_id and (i.status = 'paid' or i.amount_paid_atomic > 0));

-- Down Migration
drop function payment_link_payment_count(text);
drop index invoices_payment_link_idx;
alter table invoices drop column payment_link_id;
