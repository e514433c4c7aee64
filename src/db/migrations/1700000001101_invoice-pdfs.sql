-- Up Migration

-- The PDF of a sent invoice, kept as first rendered: the email attaches these bytes, reminders
-- attach them, and GET /v1/invoices/{id}/pdf returns them, so the customer and the merchant hold
-- the same document whatever changes later (renderer, fonts, customer or account details).
create table invoice_pdfs (
  invoice_id text primary key references invoices (id) on delete cascade,
  pdf bytea not null,
  sha256 bytea not null,
  created_at timestamptz not null default now()
);

-- Down Migration
drop table invoice_pdfs;
