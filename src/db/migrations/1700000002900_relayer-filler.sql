-- Up Migration

-- A nonce whose call the node refuses for good is used by a no-op, purpose `filler` (src/chain/
-- relayer.ts, fillNonce), so the key's later transactions can be mined.
alter table relayer_transactions drop constraint relayer_transactions_purpose_check;
alter table relayer_transactions add constraint relayer_transactions_purpose_check check (purpose in ('charge', 'cancel', 'filler'));

-- Down Migration

-- Refused while a filler is recorded: its row holds a used nonce of the sequence.
alter table relayer_transactions drop constraint relayer_transactions_purpose_check;
alter table relayer_transactions add constraint relayer_transactions_purpose_check check (purpose in ('charge', 'cancel'));
