-- Up Migration

-- What a confirmed payment's log said, apart from where it sat (src/chain/detector.ts,
-- observedDigest): the same signed transaction re-included in another block after a reorg deeper
-- than the confirmations is the same payment only if its log says the same. On another chain
-- state it may pay another address, another amount, another reference (a review had a contract
-- redirect a re-included proxy call to the attacker's address while the row, only moved, kept
-- counting toward the first merchant's invoice). Rows from before this column have none: seen
-- again in another block, they are compared by what they stored of their log (saysTheSame).
alter table payments add column observed_digest text;

-- Down Migration

alter table payments drop column observed_digest;
