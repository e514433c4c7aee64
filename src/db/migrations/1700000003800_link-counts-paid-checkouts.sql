-- Up Migration

-- A checkout counts as a payment of its link once it is paid, no sooner: a review paid two 100 USDC
-- checkouts of a max_payments 2 link one atomic unit each (any payment with a checkout's reference
-- is applied to it) and the link was used up for honest buyers, for good (a voided checkout kept
-- its applied payment). A checkout partly paid is still the merchant's to settle: it keeps the link
-- from being deleted (src/db/payment-links.ts), and counts once paid in full.
create or replace function payment_link_payment_count(link_id text) returns integer language sql stable parallel safe
  return (select count(*) from payment_link_payments p where p.payment_link_id = link_id)
    + (select count(*) from invoices i where i.payment_link_id = link_id and i.status = 'paid');

-- Down Migration

create or replace function payment_link_payment_count(link_id text) returns integer language sql stable parallel safe
  return (select count(*) from payment_link_payments p where p.payment_link_id = link_id)
    + (select count(*) from invoices i
         where i.payment_link_id = link_id and (i.status = 'paid' or i.amount_paid_atomic > 0));
