-- Up Migration

-- What of an invoice's own fee its applied payments counted so far, beside amount_paid_atomic and
-- written by the same statements (writeInvoiceBalances, reorgOutPayments): the payment
-- instructions after a partial payment ask for a fee no larger than what is left of it
-- (src/domain/payments.ts, paymentInstructions). They asked for the fee of what remains by the
-- rule, rounded half up, and where the partial's own fee had been rounded up too, the fee counted
-- was capped one unit short: the payer paid exactly what was asked and the invoice stayed open,
-- owing 1. Stored on the row, so every read of the invoice (the API, the payment page, an event's
-- snapshot) has it. The detector still counts from the payments themselves (withFeesCounted).
alter table invoices add column fee_counted_atomic numeric(78, 0) not null default 0 check (fee_counted_atomic >= 0);

update invoices i set fee_counted_atomic = f.fee
from (
  select p.invoice_id, sum(p.counted_atomic - least(p.counted_atomic, p.received_atomic)) as fee
  from payments p where p.outcome = 'applied' and p.invoice_id is not null
  group by p.invoice_id
) f
where i.id = f.invoice_id and f.fee > 0;

-- Down Migration

alter table invoices drop column fee_counted_atomic;
