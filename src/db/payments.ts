// SQL of on-chain payments: the payment rows, the chain cursors, and the invoice reads and writes
// the detector needs (docs/payments.md). Batches go through jsonb_to_recordset so a scanned range
// costs a handful of statements however many payments it holds.
import type { ScannedFor } from '../domain/chains.js';
import type { Environment } from '../domain/environment.js';
import { newId } from '../domain/ids.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import type { PaymentOutcome, PaymentStatus } from '../domain/payments.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';
import type { Scope } from './scope.js';
import { CHECKOUT_OF_INVOICE, type CheckoutTermsRow } from './subscription-chain.js';

export interface PaymentRow {
  id: string;
  account_id: string;
  environment: Environment;
  invoice_id: string | null;
  chain_id: number;
  network: string;
  tx_hash: string;
  log_index: number;
  /** The payment's place within its transaction: its identity survives a re-inclusion (observe.ts). */
  tx_position: string;
  block_number: string;
  block_hash: string;
  block_time: Date | null;
  token_address: string;
  from_address: string | null;
  to_address: string;
  amount_atomic: string;
  fee_atomic: string;
  fee_address: string | null;
  fee_expected_atomic: string | null;
  /** What reached the settlement address, per the transaction's Transfer logs. */
  received_atomic: string;
  /** What reached the chain's fee address as this payment's fee. */
  fee_received_atomic: string;
  /** What it added to its invoice's amount_paid_atomic; null when it counts toward nothing. */
  counted_atomic: string | null;
  payment_reference: string | null;
  /** The name of its kind of chain log (src/chain/kinds/). */
  kind: string;
  status: PaymentStatus;
  outcome: PaymentOutcome | null;
  created_at: Date;
  confirmed_at: Date | null;
  removed_at: Date | null;
  /** Set when a confirmed payment's block left the chain in a reorg deeper than the confirmations. */
  reorged_out_at: Date | null;
  /** The chain's head as last seen by a worker (confirmations are counted from it). */
  head_block: string | null;
}

const COLUMNS = `p.id, p.account_id, p.environment, p.invoice_id, p.chain_id, p.network, p.tx_hash, p.log_index, p.tx_position,
  p.block_number::text as block_number, p.block_hash, p.block_time, p.token_address, p.from_address, p.to_address,
  p.amount_atomic::text as amount_atomic, p.fee_atomic::text as fee_atomic, p.fee_address,
  p.fee_expected_atomic::text as fee_expected_atomic, p.received_atomic::text as received_atomic,
  p.fee_received_atomic::text as fee_received_atomic, p.counted_atomic::text as counted_atomic, p.payment_reference, p.kind,
  p.status, p.outcome, p.created_at, p.confirmed_at, p.removed_at, p.reorged_out_at, cc.head_block::text as head_block`;
const FROM = 'from payments p left join chain_cursors cc on cc.chain_id = p.chain_id';

// ---- the detector's side --------------------------------------------------------------------

export interface ChainCursorRow {
  chain_id: number;
  block_number: string;
  block_hash: string | null;
  block_time: Date | null;
  /** Recent [block, hash] pairs, newest last. */
  checkpoints: [string, string][];
  head_block: string | null;
  safe_block: string | null;
  head_seen_at: Date | null;
  /** The hash of the chain's block 0 when the cursor last moved: another one is another chain. */
  genesis_hash: string | null;
  /** What the cursor was scanned for (domain/chains.ts ScannedFor); null before anyone said. */
  scanned_for: ScannedFor | null;
  /** The cursor's block before its last rewind: ranges up to it are rescans (confirmed payments there may have left the chain). */
  rescan_to: string | null;
}

export async function findCursor(db: Queryable, chainId: number, forUpdate = false): Promise<ChainCursorRow | null> {
  const { rows } = await db.query<ChainCursorRow>(
    `select chain_id, block_number::text as block_number, block_hash, block_time, checkpoints,
       head_block::text as head_block, safe_block::text as safe_block, head_seen_at, genesis_hash, scanned_for, rescan_to::text as rescan_to
     from chain_cursors where chain_id = $1 ${forUpdate ? 'for update' : ''}`,
    [chainId],
  );
  return rows[0] ?? null;
}

/** The cursor row, created at `startBlock - 1` the first time, locked for the caller's transaction. */
export async function lockCursor(db: Queryable, chainId: number, initialBlock: bigint): Promise<ChainCursorRow> {
  await db.query('insert into chain_cursors (chain_id, block_number) values ($1, $2) on conflict (chain_id) do nothing', [chainId, initialBlock.toString()]);
  return (await findCursor(db, chainId, true))!;
}

export async function moveCursor(
  db: Queryable,
  chainId: number,
  to: { block: bigint; hash: string | null; time: Date | null; checkpoints: [string, string][] },
): Promise<void> {
  await db.query(
    `update chain_cursors set block_number = $2, block_hash = $3, block_time = $4, checkpoints = $5::jsonb, updated_at = clock_timestamp()
     where chain_id = $1`,
    [chainId, to.block.toString(), to.hash, to.time, JSON.stringify(to.checkpoints)],
  );
}

/** The cursor goes back from `from`: what it covered up to there is rescanned. */
export async function markRescan(db: Queryable, chainId: number, from: bigint): Promise<void> {
  await db.query('update chain_cursors set rescan_to = greatest(rescan_to, $2) where chain_id = $1', [chainId, from.toString()]);
}

/** The head a run read; never moves back (a slower run read an older one), but see resetHead. */
export async function recordHead(db: Queryable, chainId: number, head: bigint, safe: bigint): Promise<void> {
  await db.query(
    `update chain_cursors set head_block = greatest(head_block, $2), safe_block = greatest(safe_block, $3), head_seen_at = clock_timestamp()
     where chain_id = $1`,
    [chainId, head.toString(), safe.toString()],
  );
}

/**
 * A recorded head the chain has no block for (a lie believed once, a chain rolled back): forgotten.
 * What a rewind marked for rescanning stays marked: the confirmed payments there are still to be
 * checked against the new chain (unlike resetHead, for a chain started over).
 */
export async function forgetHead(db: Queryable, chainId: number): Promise<void> {
  await db.query('update chain_cursors set head_block = null, safe_block = null where chain_id = $1', [chainId]);
}

/** A chain started over: the head seen before, and what was to be rescanned of the old chain, mean nothing now. */
export async function resetHead(db: Queryable, chainId: number): Promise<void> {
  await db.query('update chain_cursors set head_block = null, safe_block = null, rescan_to = null where chain_id = $1', [chainId]);
}

/** Records what the cursor is a cursor of: the chain (its block 0) and the set it is scanned for. */
export async function setCursorIdentity(db: Queryable, chainId: number, identity: { genesisHash: string; scannedFor: ScannedFor }): Promise<void> {
  await db.query('update chain_cursors set genesis_hash = $2, scanned_for = $3::jsonb where chain_id = $1', [
    chainId,
    identity.genesisHash,
    JSON.stringify(identity.scannedFor),
  ]);
}

/** Pending payments of a chain within [from, to]: the rows a scan of that window may remove. */
export async function pendingPaymentsBetween(
  db: Queryable,
  chainId: number,
  from: bigint,
  to: bigint,
): Promise<{ tx_hash: string; tx_position: string; block_number: string; block_hash: string }[]> {
  const { rows } = await db.query<{ tx_hash: string; tx_position: string; block_number: string; block_hash: string }>(
    `select tx_hash, tx_position, block_number::text as block_number, block_hash from payments
     where chain_id = $1 and status = 'pending' and block_number between $2 and $3`,
    [chainId, from.toString(), to.toString()],
  );
  return rows;
}

/**
 * The addresses whose incoming token transfers are watched on a chain: every settlement address
 * of its environment, and the address each open invoice on it was sent with. Lower case.
 */
export async function watchedAddresses(db: Queryable, chainId: number, environment: Environment): Promise<string[]> {
  // The open invoices' distinct addresses by a skip scan of invoices_open_by_address_idx: one
  // index probe per address, not one row per open invoice (the watcher reads this every run).
  const { rows } = await db.query<{ address: string }>(
    `with recursive a (address) as (
       (select lower(settlement_address) from invoices
        where chain_id = $1 and status in ('open', 'overdue') and settlement_address is not null
        order by lower(settlement_address) limit 1)
       union all
       select (select lower(i.settlement_address) from invoices i
               where i.chain_id = $1 and i.status in ('open', 'overdue') and i.settlement_address is not null
                 and lower(i.settlement_address) > a.address
               order by lower(i.settlement_address) limit 1)
       from a where a.address is not null
     )
     select lower(address) as address from settlement_addresses where environment = $2
     union
     select address from a where address is not null`,
    [chainId, environment],
  );
  return rows.map((r) => r.address);
}

/**
 * Recipients (lower case) to ask for beside the watched addresses, so that a deep reorg loses no
 * payment to an address no longer watched (the merchant moved to another): those of the chain's
 * confirmed payments above `block` (the blocks a deep reorg's rescan has still to read again; none
 * in steady state), and those of payments that counted and were reorged out in the last day (the
 * same transaction broadcast again lands in a later block, read by any later run; a transaction
 * not included again within a day has left the nodes' pools).
 */
export async function recipientsToRescan(db: Queryable, chainId: number, block: bigint): Promise<string[]> {
  const { rows } = await db.query<{ address: string }>(
    `select lower(to_address) as address from payments where chain_id = $1 and status = 'confirmed' and block_number > $2
     union
     select lower(to_address) from payments
     where chain_id = $1 and status = 'removed' and reorged_out_at > clock_timestamp() - interval '1 day' and counted_atomic is not null`,
    [chainId, block.toString()],
  );
  return rows.map((r) => r.address);
}

/** An invoice as the detector matches and applies payments to it. */
export interface PayableInvoiceRow {
  id: string;
  account_id: string;
  environment: Environment;
  status: InvoiceStatus;
  chain_id: number;
  token_address: string;
  token_decimals: number;
  settlement_address: string | null;
  payment_reference: string | null;
  payment_reference_topic: string | null;
  amount_atomic: string;
  amount_paid_atomic: string;
  fee_bps: number | null;
  /** The invoice's own fee (of its whole amount), as stored at creation. */
  fee_atomic: string | null;
  /** The fees its applied payments counted so far (never above fee_atomic). */
  fee_counted_atomic: string;
  /** A subscription's period invoice: the subscription's contract and on-chain id, and the period (else null). */
  subscription_contract: string | null;
  subscription_onchain_id: string | null;
  period_index: number | null;
  /** The invoice of a subscription checkout: the checkout's terms (else null). */
  checkout: CheckoutTermsRow | null;
}

const PAYABLE = `i.id, i.account_id, i.environment, i.status, i.chain_id, i.token_address, i.token_decimals, i.settlement_address, i.payment_reference,
  i.payment_reference_topic, i.amount_atomic::text as amount_atomic, i.amount_paid_atomic::text as amount_paid_atomic, i.fee_bps,
  i.fee_atomic::text as fee_atomic, i.period_index,
  (select s.contract_address from subscriptions s where s.id = i.subscription_id) as subscription_contract,
  (select s.onchain_id from subscriptions s where s.id = i.subscription_id) as subscription_onchain_id,
  ${CHECKOUT_OF_INVOICE}`;

/**
 * The fees the locked invoices' applied payments counted, read by a statement of its own once the
 * rows are locked: a subquery of the locking statement would read the payments as they were before
 * it waited for the lock, and a payment applied meanwhile (POST /apply racing the detector) would
 * leave room for a second full fee.
 */
async function withFeesCounted(db: Queryable, rows: Omit<PayableInvoiceRow, 'fee_counted_atomic'>[]): Promise<PayableInvoiceRow[]> {
  if (rows.length === 0) return [];
  const { rows: fees } = await db.query<{ id: string; fee_counted_atomic: string }>(
    `select fp.invoice_id as id, sum(fp.counted_atomic - least(fp.counted_atomic, fp.received_atomic))::text as fee_counted_atomic
     from payments fp where fp.invoice_id = any($1::text[]) and fp.outcome = 'applied'
     group by fp.invoice_id`,
    [rows.map((r) => r.id)],
  );
  const counted = new Map(fees.map((f) => [f.id, f.fee_counted_atomic]));
  return rows.map((r) => ({ ...r, fee_counted_atomic: counted.get(r.id) ?? '0' }));
}

/** An open invoice a plain transfer may settle: sent to `address` (lower case), owing exactly `remainingAtomic`. */
export interface OwingKey {
  address: string;
  remainingAtomic: bigint;
}

/**
 * The invoices a range's payments may concern, row-locked in id order (no deadlock with the API's
 * void): those whose reference topic appeared; the open ones sent to an address and owing exactly
 * what a plain transfer moved (`owing`: only those can it settle); every open one sent to an
 * address in `transferTargets` (a kind matching by address alone); and `restoredTo`, the invoices
 * payments reorged out and back had counted toward, whatever their status (they count again there).
 */
export async function lockPayableInvoices(
  db: Queryable,
  chainId: number,
  topics: string[],
  transferTargets: string[],
  owing: OwingKey[] = [],
  checkoutReferences: string[] = [],
  restoredTo: string[] = [],
): Promise<PayableInvoiceRow[]> {
  if (topics.length === 0 && transferTargets.length === 0 && owing.length === 0 && checkoutReferences.length === 0 && restoredTo.length === 0) return [];
  // A checkout (anyone can open one, naming any amount) is paid by its reference only: a plain
  // transfer never matches it, so no stranger's checkout can take someone else's transfer.
  const { rows } = await db.query<Omit<PayableInvoiceRow, 'fee_counted_atomic'>>(
    `select ${PAYABLE} from invoices i
     where i.amount_atomic is not null and i.id in (
       select r.id from invoices r where r.chain_id = $1 and r.payment_reference_topic = any($2::text[])
       union
       select a.id from invoices a
       where a.chain_id = $1 and a.status in ('open', 'overdue') and a.settlement_address is not null
         and lower(a.settlement_address) = any($3::text[]) and a.checkout_expires_at is null
       union
       select o.id from unnest($4::text[], $5::numeric[]) as k (address, remaining)
       join invoices o on o.chain_id = $1 and o.status in ('open', 'overdue') and o.settlement_address is not null
         and o.checkout_expires_at is null and lower(o.settlement_address) = k.address
         and o.amount_atomic - o.amount_paid_atomic = k.remaining
       union
       select c.invoice_id from subscription_checkouts c where c.chain_id = $1 and c.checkout_reference = any($6::text[])
       union
       select x.id from invoices x where x.chain_id = $1 and x.id = any($7::text[])
     )
     order by i.id
     for update`,
    [chainId, topics, transferTargets, owing.map((k) => k.address), owing.map((k) => k.remainingAtomic.toString()), checkoutReferences, restoredTo],
  );
  return withFeesCounted(db, rows);
}

export async function lockPayableInvoice(db: Queryable, scope: Scope, id: string): Promise<PayableInvoiceRow | null> {
  const { rows } = await db.query<Omit<PayableInvoiceRow, 'fee_counted_atomic'>>(
    `select ${PAYABLE} from invoices i where i.id = $1 and i.account_id = $2 and i.environment = $3 for update`,
    [id, scope.accountId, scope.environment],
  );
  return (await withFeesCounted(db, rows))[0] ?? null;
}

/** Which account an address is the settlement address of (for payments no invoice claims). */
export async function ownersOfAddresses(db: Queryable, chainId: number, environment: Environment, addresses: string[]): Promise<Map<string, string>> {
  if (addresses.length === 0) return new Map();
  // The account whose current address it is first; else the latest invoice sent to it (one
  // index probe each: an address may have had many invoices).
  const { rows } = await db.query<{ address: string; account_id: string }>(
    `select o.address, o.account_id from (
       select a.address, coalesce(
         (select s.account_id from settlement_addresses s where s.environment = $2 and lower(s.address) = a.address
          order by s.updated_at desc, s.account_id limit 1),
         (select i.account_id from invoices i where i.chain_id = $1 and i.settlement_address is not null and lower(i.settlement_address) = a.address
          order by i.sent_at desc, i.account_id limit 1)) as account_id
       from (select distinct unnest($3::text[]) as address) a
     ) o where o.account_id is not null`,
    [chainId, environment, addresses],
  );
  return new Map(rows.map((r) => [r.address, r.account_id]));
}

export interface ExistingPayment {
  id: string;
  tx_hash: string;
  log_index: number;
  tx_position: string;
  status: PaymentStatus;
  block_hash: string;
  created_at: Date;
  /** Reorged out: what it had counted toward its invoice then (null: it counted nothing). */
  reorged_out_at: Date | null;
  counted_atomic: string | null;
  /** The invoice it was recorded (or applied by hand) against. */
  invoice_id: string | null;
  /** What its log said, apart from where it sat (the detector's observedDigest); null on rows older than the column. */
  observed_digest: string | null;
  /** What it stored of its log: compared instead of the digest on rows older than it. */
  to_address: string;
  token_address: string;
  from_address: string | null;
  fee_address: string | null;
  amount_atomic: string;
  fee_atomic: string;
  received_atomic: string;
  fee_received_atomic: string;
}

/**
 * The rows of these payments, by (tx, position in it); a row written before positions existed is
 * found by its `log:<log index>` position. Row-locked in id order.
 */
export async function lockExistingPayments(db: Queryable, chainId: number, keys: { txHash: string; txPosition: string; logIndex: number }[]): Promise<ExistingPayment[]> {
  if (keys.length === 0) return [];
  const { rows } = await db.query<ExistingPayment>(
    `select p.id, p.tx_hash, p.log_index, p.tx_position, p.status, p.block_hash, p.created_at, p.reorged_out_at,
       p.counted_atomic::text as counted_atomic, p.invoice_id, p.observed_digest, p.to_address, p.token_address, p.from_address,
       p.fee_address, p.amount_atomic::text as amount_atomic, p.fee_atomic::text as fee_atomic, p.received_atomic::text as received_atomic,
       p.fee_received_atomic::text as fee_received_atomic from payments p
     where p.chain_id = $1 and exists (
       select 1 from unnest($2::text[], $3::text[], $4::int[]) as k (tx_hash, tx_position, log_index)
       where k.tx_hash = p.tx_hash and (k.tx_position = p.tx_position or p.tx_position = 'log:' || k.log_index))
     order by p.id
     for update of p`,
    [chainId, keys.map((k) => k.txHash), keys.map((k) => k.txPosition), keys.map((k) => k.logIndex)],
  );
  return rows;
}

/** A payment row as the detector writes it: the row's columns, instants as ISO strings (JSON). */
export type PaymentWrite = Omit<PaymentRow, 'block_time' | 'created_at' | 'confirmed_at' | 'removed_at' | 'reorged_out_at' | 'head_block'> & {
  block_time: string | null;
  created_at: string;
  confirmed_at: string | null;
  /** What its log said, apart from where it sat (ExistingPayment.observed_digest). */
  observed_digest: string;
};

const RECORD = `x (id text, account_id text, environment environment, invoice_id text, chain_id integer, network text, tx_hash text,
  log_index integer, tx_position text, block_number bigint, block_hash text, block_time timestamptz, token_address text, from_address text,
  to_address text, amount_atomic numeric, fee_atomic numeric, fee_address text, fee_expected_atomic numeric,
  received_atomic numeric, fee_received_atomic numeric, counted_atomic numeric,
  payment_reference text, kind text, status text, outcome text, created_at timestamptz, confirmed_at timestamptz, observed_digest text)`;

/** Inserts new payment rows; a row whose (chain, tx, position) exists already is skipped. Returns the ids inserted. */
export async function insertPayments(db: Queryable, rows: PaymentWrite[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const { rows: inserted } = await db.query<{ id: string }>(
    `insert into payments (id, account_id, environment, invoice_id, chain_id, network, tx_hash, log_index, tx_position, block_number, block_hash,
       block_time, token_address, from_address, to_address, amount_atomic, fee_atomic, fee_address, fee_expected_atomic,
       received_atomic, fee_received_atomic, counted_atomic, payment_reference, kind, status, outcome, created_at, updated_at, confirmed_at,
       observed_digest)
     select id, account_id, environment, invoice_id, chain_id, network, tx_hash, log_index, tx_position, block_number, block_hash,
       block_time, token_address, from_address, to_address, amount_atomic, fee_atomic, fee_address, fee_expected_atomic,
       received_atomic, fee_received_atomic, counted_atomic, payment_reference, kind, status, outcome, created_at, created_at, confirmed_at,
       observed_digest
     from jsonb_to_recordset($1::jsonb) as ${RECORD}
     on conflict (chain_id, tx_hash, tx_position) do nothing
     returning id`,
    [JSON.stringify(rows)],
  );
  return new Set(inserted.map((r) => r.id));
}

/**
 * A known row seen again: its block (a reorg may have moved it), what its log says, its match, and pending ->
 * confirmed. Only rows not confirmed yet change. Returns the ids changed.
 */
export async function updatePayments(db: Queryable, rows: PaymentWrite[]): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const { rows: updated } = await db.query<{ id: string }>(
    `update payments p set
       invoice_id = x.invoice_id, account_id = x.account_id, environment = x.environment, block_number = x.block_number,
       block_hash = x.block_hash, block_time = x.block_time, log_index = x.log_index, tx_position = x.tx_position,
       -- What the log says, again: the same transaction on another chain state (a reorg) may pay
       -- someone else, in another token, another amount.
       token_address = x.token_address, from_address = x.from_address, to_address = x.to_address,
       amount_atomic = x.amount_atomic, fee_atomic = x.fee_atomic, fee_address = x.fee_address,
       fee_expected_atomic = x.fee_expected_atomic, received_atomic = x.received_atomic, fee_received_atomic = x.fee_received_atomic,
       payment_reference = x.payment_reference, observed_digest = x.observed_digest, status = x.status, outcome = x.outcome,
       confirmed_at = x.confirmed_at, removed_at = null,
       -- A reorged-out payment seen again stays marked (with what it had counted) until it confirms again.
       counted_atomic = case when x.status = 'confirmed' then x.counted_atomic else p.counted_atomic end,
       reorged_out_at = case when x.status = 'confirmed' then null else p.reorged_out_at end, updated_at = clock_timestamp()
     from jsonb_to_recordset($1::jsonb) as ${RECORD}
     where p.id = x.id and p.status <> 'confirmed'
     returning p.id`,
    [JSON.stringify(rows)],
  );
  return new Set(updated.map((r) => r.id));
}

/**
 * Pending payments of the chain within [from, to] (to null: no upper bound) that the chain no
 * longer holds (`keep`: the (tx, position) keys it still holds): removed. Returns them.
 */
export async function removeVanishedPayments(
  db: Queryable,
  chainId: number,
  from: bigint,
  to: bigint | null,
  keep: { txHash: string; txPosition: string }[],
): Promise<PaymentRow[]> {
  const { rows } = await db.query<PaymentRow>(
    `with gone as (
       update payments p set status = 'removed', removed_at = clock_timestamp(), updated_at = clock_timestamp()
       where p.chain_id = $1 and p.status = 'pending' and p.block_number >= $2 and ($3::bigint is null or p.block_number <= $3)
         and not exists (select 1 from unnest($4::text[], $5::text[]) as k (tx_hash, tx_position)
                         where k.tx_hash = p.tx_hash and k.tx_position = p.tx_position)
       returning p.*
     )
     select ${COLUMNS} from gone p left join chain_cursors cc on cc.chain_id = p.chain_id`,
    [chainId, from.toString(), to?.toString() ?? null, keep.map((k) => k.txHash), keep.map((k) => k.txPosition)],
  );
  return rows;
}

/**
 * Confirmed payments of the chain within [from, to] that the chain no longer holds (a reorg deeper
 * than the confirmations): removed and marked reorged out, and what an applied one counted taken
 * off its invoice's amount_paid_atomic (its status stays: a paid invoice stays paid, the merchant
 * is told by payment.reorged_out). The row keeps counted_atomic, so that its transaction, should it
 * come back, counts again even toward an invoice that stayed paid. Returns them as they are now,
 * with what each had counted.
 */
export async function reorgOutPayments(
  db: Queryable,
  chainId: number,
  from: bigint,
  to: bigint,
  keep: { txHash: string; txPosition: string }[],
): Promise<ReorgedOutRow[]> {
  return reorgOut(
    db,
    `p.chain_id = $1 and p.block_number between $2 and $3
       and not exists (select 1 from unnest($4::text[], $5::text[]) as k (tx_hash, tx_position)
                       where k.tx_hash = p.tx_hash and k.tx_position = p.tx_position)`,
    [chainId, from.toString(), to.toString(), keep.map((k) => k.txHash), keep.map((k) => k.txPosition)],
  );
}

/**
 * These confirmed payments, seen again in another block saying something else (the detector's
 * observedDigest): their transaction is on the chain, but not as the payment that counted. Reorged
 * out as reorgOutPayments does, so that what the log says now is matched again, by its kind's rule.
 */
export async function reorgOutPaymentsById(db: Queryable, ids: string[]): Promise<ReorgedOutRow[]> {
  if (ids.length === 0) return [];
  return reorgOut(db, `p.id = any($1::text[])`, [ids]);
}

/** A payment reorged out, with what it had counted toward its invoice (null: nothing). */
export type ReorgedOutRow = PaymentRow & { uncounted_atomic: string | null };

/** The confirmed payments `where` selects: removed, marked reorged out, and what they counted taken off their invoices. */
async function reorgOut(db: Queryable, where: string, params: unknown[]): Promise<ReorgedOutRow[]> {
  const { rows } = await db.query<ReorgedOutRow>(
    `with old as (
       select p.id, p.outcome, p.counted_atomic, p.received_atomic from payments p
       where p.status = 'confirmed' and ${where}
       order by p.id
       for update of p
     ), gone as (
       update payments p set status = 'removed', outcome = null, removed_at = clock_timestamp(),
         reorged_out_at = clock_timestamp(), updated_at = clock_timestamp()
       from old where p.id = old.id
       returning p.*, case when old.outcome = 'applied' then old.counted_atomic end as uncounted_atomic,
         case when old.outcome = 'applied' then old.counted_atomic - least(old.counted_atomic, old.received_atomic) end as uncounted_fee_atomic
     ), uncount as (
       update invoices i set amount_paid_atomic = greatest(0, i.amount_paid_atomic - u.total),
         fee_counted_atomic = greatest(0, i.fee_counted_atomic - u.fee), updated_at = clock_timestamp()
       from (select invoice_id, sum(uncounted_atomic) as total, sum(uncounted_fee_atomic) as fee from gone where uncounted_atomic is not null group by invoice_id) u
       where i.id = u.invoice_id
     )
     select ${COLUMNS}, p.uncounted_atomic::text as uncounted_atomic from gone p left join chain_cursors cc on cc.chain_id = p.chain_id`,
    params,
  );
  return rows;
}

/** Confirmed payments seen again in another block (a reorg re-included their transaction): their new place, nothing else. */
export async function moveConfirmedPayments(
  db: Queryable,
  rows: { id: string; block_number: string; block_hash: string; block_time: string | null; log_index: number; tx_position: string }[],
): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `update payments p set block_number = x.block_number, block_hash = x.block_hash, block_time = coalesce(x.block_time, p.block_time),
       log_index = x.log_index, tx_position = x.tx_position, updated_at = clock_timestamp()
     from jsonb_to_recordset($1::jsonb) as x (id text, block_number bigint, block_hash text, block_time timestamptz, log_index integer, tx_position text)
     where p.id = x.id and p.status = 'confirmed'`,
    [JSON.stringify(rows)],
  );
}

/** A confirmed payment's effect on an invoice: its new total paid, and paid (with the block's time) when it is. */
export interface InvoiceBalanceWrite {
  id: string;
  amount_paid_atomic: string;
  /** What of the invoice's fee the applied payments counted: its ledger's feeCountedAtomic. */
  fee_counted_atomic: string;
  status: InvoiceStatus;
  paid_at: string | null;
}

/** The status change fires the invoice triggers: invoice.paid, the receipt, the reminders' stop. */
export async function writeInvoiceBalances(db: Queryable, rows: InvoiceBalanceWrite[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `update invoices i set amount_paid_atomic = x.amount_paid_atomic, fee_counted_atomic = x.fee_counted_atomic, status = x.status::invoice_status,
       paid_at = coalesce(x.paid_at, i.paid_at),
       attempt_count = i.attempt_count + case when x.status = 'paid' and i.status <> 'paid' then 1 else 0 end,
       updated_at = clock_timestamp()
     from jsonb_to_recordset($1::jsonb) as x (id text, amount_paid_atomic numeric, fee_counted_atomic numeric, status text, paid_at timestamptz)
     where i.id = x.id`,
    [JSON.stringify(rows)],
  );
}

/** Payment events, each with the object as the API presents it, in the order given: one statement, whatever their number. */
export async function emitPaymentEvents(db: Queryable, events: { accountId: string; environment: Environment; type: string; id: string; object: object }[]): Promise<void> {
  if (events.length === 0) return;
  await db.query(
    `select emit_events(array(
       select row(e->>'event_id', e->>'account_id', (e->>'environment')::environment, e->>'type', 'payment', e->>'id', e->'object', null)::event_write
       from jsonb_array_elements($1::jsonb) with ordinality as t (e, n)
       order by n))`,
    [JSON.stringify(events.map((e) => ({ event_id: newId('evt'), account_id: e.accountId, environment: e.environment, type: e.type, id: e.id, object: e.object })))],
  );
}

/** invoice.partially_paid for each invoice, as its row stands now. */
export async function emitPartiallyPaid(db: Queryable, invoiceIds: string[]): Promise<void> {
  if (invoiceIds.length === 0) return;
  await db.query(`select emit_invoice_event(id, 'invoice.partially_paid') from unnest($1::text[]) with ordinality as t (id, n) order by n`, [invoiceIds]);
}

// ---- the API's side -------------------------------------------------------------------------

export async function findPayment(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<PaymentRow | null> {
  const { rows } = await db.query<PaymentRow>(
    `select ${COLUMNS} ${FROM} where p.id = $1 and p.account_id = $2 and p.environment = $3 ${forUpdate ? 'for update of p' : ''}`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

export interface PaymentFilters {
  unmatched?: boolean;
  invoiceId?: string;
  status?: PaymentStatus;
}

export async function listPayments(db: Queryable, scope: Scope, filters: PaymentFilters, page: PageRequest): Promise<PageResult<PaymentRow>> {
  const conditions: string[] = [];
  const values: unknown[] = [];
  if (filters.unmatched !== undefined) conditions.push(filters.unmatched ? `p.outcome = 'unmatched'` : `p.outcome is distinct from 'unmatched'`);
  if (filters.invoiceId !== undefined) {
    values.push(filters.invoiceId);
    conditions.push(`p.invoice_id = $${4 + values.length}`);
  }
  if (filters.status !== undefined) {
    values.push(filters.status);
    conditions.push(`p.status = $${4 + values.length}`);
  }
  return listPage<PaymentRow>(db, scope, { table: 'payments', alias: 'p', select: `select ${COLUMNS} ${FROM}`, filters: conditions, values }, page);
}

/** Every payment of an invoice, oldest first (an invoice has few). */
export async function paymentsOfInvoice(db: Queryable, invoiceId: string): Promise<PaymentRow[]> {
  const { rows } = await db.query<PaymentRow>(`select ${COLUMNS} ${FROM} where p.invoice_id = $1 order by p.created_at, p.id`, [invoiceId]);
  return rows;
}

/** pendingPaymentsAtomic of many invoices in one query (0 for those with none). */
export async function pendingPaymentsAtomicOf(db: Queryable, invoiceIds: readonly string[]): Promise<Map<string, bigint>> {
  const totals = new Map<string, bigint>(invoiceIds.map((id) => [id, 0n]));
  if (invoiceIds.length === 0) return totals;
  const { rows } = await db.query<{ invoice_id: string; total: string }>(
    `select invoice_id, sum(received_atomic + fee_received_atomic)::text as total from payments
     where invoice_id = any($1::text[]) and status = 'pending' group by invoice_id`,
    [invoiceIds],
  );
  for (const r of rows) totals.set(r.invoice_id, BigInt(r.total));
  return totals;
}

/** What the invoice's payments seen on the chain and not yet confirmed moved (received + fee received), atomic. */
export async function pendingPaymentsAtomic(db: Queryable, invoiceId: string): Promise<bigint> {
  const { rows } = await db.query<{ total: string }>(
    `select coalesce(sum(received_atomic + fee_received_atomic), 0)::text as total from payments where invoice_id = $1 and status = 'pending'`,
    [invoiceId],
  );
  return BigInt(rows[0].total);
}

/** A merchant's choice: an unmatched confirmed payment now belongs to an invoice, with what it did to it and counted toward it. */
export async function attachPayment(
  db: Queryable,
  id: string,
  invoiceId: string,
  outcome: PaymentOutcome,
  feeExpected: string | null,
  counted: string | null,
): Promise<void> {
  await db.query(
    `update payments set invoice_id = $2, outcome = $3, fee_expected_atomic = $4, counted_atomic = $5, updated_at = clock_timestamp() where id = $1`,
    [id, invoiceId, outcome, feeExpected, counted],
  );
}
