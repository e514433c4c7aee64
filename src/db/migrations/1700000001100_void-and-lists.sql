-- Up Migration

-- When an invoice was voided: printed on its VOID document. Set by the void transition only.
alter table invoices add column voided_at timestamptz;

-- Lists page newest first by (created_at, id): a keyset that never moves for an existing row, so
-- paging while new rows are inserted sees every older row exactly once.
create index invoices_list_idx on invoices (account_id, environment, created_at desc, id desc);
create index invoices_customer_list_idx on invoices (customer_id, created_at desc, id desc);
create index products_list_idx on products (account_id, environment, created_at desc, id desc);
create index credentials_list_idx on credentials (account_id, environment, created_at desc, id desc);

-- Down Migration
drop index credentials_list_idx, products_list_idx, invoices_customer_list_idx, invoices_list_idx;
alter table invoices drop column voided_at;
