-- Up Migration

-- The language documents are written in for a customer: an invoice carries its own (chosen at
-- create or while draft, defaulting to the customer's stored one), and the customer keeps the
-- last one given as the default for their next invoices. Values are canonical BCP 47 tags whose
-- language the service has templates for (checked by the API, src/domain/locale.ts).
alter table customers add column locale text;
alter table invoices add column customer_locale text not null default 'en';

-- Where a payer's wallet sends the funds: the merchant's own address (non-custodial). With it,
-- the payment page offers an EIP-681 URI for the exact amount; without it, only the terms.
alter table accounts add column settlement_address text
  check (settlement_address ~ '^0x[0-9a-fA-F]{40}$');

-- Down Migration
alter table accounts drop column settlement_address;
alter table invoices drop column customer_locale;
alter table customers drop column locale;
