-- Up Migration

-- Paid means paid (issue 24, docs/payments.md "What counts"). A payment row says what its Transfer
-- logs moved and what it counted toward its invoice, and its identity survives the re-inclusion
-- of its transaction in another block after a reorg.
alter table payments
  -- What reached the settlement address (a proxy payment's verified merchant leg; a transfer's value).
  add column received_atomic numeric(78, 0),
  -- What reached the chain's own fee address as the payment's fee (0 when the fee went elsewhere or nowhere).
  add column fee_received_atomic numeric(78, 0),
  -- What the payment added to its invoice's amount_paid_atomic; null when it counts toward nothing.
  add column counted_atomic numeric(78, 0) check (counted_atomic >= 0),
  -- The payment's place within its transaction (proxy:<n>, transfer:<token>:<to>:<n>): the same
  -- after a re-inclusion, where the block's log index is not.
  add column tx_position text,
  -- A confirmed payment whose block left the chain in a reorg deeper than the confirmations.
  add column reorged_out_at timestamptz;
-- Rows written before: what they counted then (amount + fee); their place is their log index, which
-- the detector recognises as such when it meets them again.
update payments set
  received_atomic = amount_atomic,
  fee_received_atomic = case when kind = 'proxy' then fee_atomic else 0 end,
  counted_atomic = case when outcome = 'applied' then amount_atomic + fee_atomic end,
  tx_position = 'log:' || log_index;
alter table payments
  alter column received_atomic set not null,
  alter column fee_received_atomic set not null,
  alter column tx_position set not null;
alter table payments drop constraint payments_chain_id_tx_hash_log_index_key;
alter table payments add constraint payments_chain_id_tx_hash_tx_position_key unique (chain_id, tx_hash, tx_position);
create index payments_confirmed_block_idx on payments (chain_id, block_number) where status = 'confirmed';
-- The cursor's block before its last rewind: ranges up to it are rescans, where confirmed payments
-- may have left the chain (only those ranges look for them).
alter table chain_cursors add column rescan_to bigint;

-- Down Migration
alter table chain_cursors drop column rescan_to;
drop index payments_confirmed_block_idx;
alter table payments drop constraint payments_chain_id_tx_hash_tx_position_key;
alter table payments add constraint payments_chain_id_tx_hash_log_index_key unique (chain_id, tx_hash, log_index);
alter table payments drop column reorged_out_at, drop column tx_position, drop column counted_atomic,
  drop column fee_received_atomic, drop column received_atomic;
