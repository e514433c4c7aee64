// The relayer's transactions (migration 1700000002100): one nonce sequence per chain and key,
// serialised across processes by a session advisory lock held while a transaction is signed,
// recorded and broadcast. The lock is the session's, not a transaction's, so the record commits
// before the broadcast (a crash between the two leaves a row to broadcast again) while the next
// sender still waits; a process that dies loses its session and with it the lock.
import { withClient, type Pool, type PoolClient, type Queryable } from './pool.js';

/** What a transaction does: a call asked for, or `filler`, a no-op that uses a nonce the node refuses its call for (relayer.ts, fillNonce). */
export type RelayerPurpose = 'charge' | 'cancel' | 'filler';
export type RelayerTxStatus = 'pending' | 'replaced' | 'mined' | 'reverted' | 'dropped' | 'failed';

export interface RelayerTransactionRow {
  id: string;
  chain_id: number;
  from_address: string;
  nonce: string;
  tx_hash: string;
  raw_tx: string;
  purpose: RelayerPurpose;
  subject: string;
  contract_address: string;
  gas_limit: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  status: RelayerTxStatus;
  replaces_id: string | null;
  sent_at_block: string;
  broadcasts: number;
  mined_block: string | null;
  /** Why it failed, in the node's words (or why it was never broadcast). */
  error: string | null;
}

export interface NewRelayerTransaction {
  chainId: number;
  from: string;
  nonce: bigint;
  txHash: string;
  rawTx: string;
  purpose: RelayerPurpose;
  subject: string;
  contract: string;
  gasLimit: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  sentAtBlock: bigint;
  replacesId?: string;
}

// nonce and id are selected as text (bigints): an "order by nonce, id" would sort those output
// columns as text ("10" before "9"); orders name the table's columns.
const COLUMNS = `id::text as id, chain_id, from_address, nonce::text as nonce, tx_hash, raw_tx, purpose, subject, contract_address,
  gas_limit::text as gas_limit, max_fee_per_gas::text as max_fee_per_gas, max_priority_fee_per_gas::text as max_priority_fee_per_gas,
  status, replaces_id::text as replaces_id, sent_at_block::text as sent_at_block, broadcasts, mined_block::text as mined_block, error`;

/**
 * Runs fn holding the sequence lock of (chainId, from): every sender of that key on that chain, in
 * any process, waits here. fn gets the lock's own connection (queries on it commit one by one).
 */
export async function withSequenceLock<T>(pool: Pool, chainId: number, from: string, fn: (db: PoolClient) => Promise<T>): Promise<T> {
  const key = `relayer:${chainId}:${from.toLowerCase()}`;
  // Held on its own client (withClient): a hold spends most of its time between queries, on the
  // node, and the lock goes with the session if the server ends it.
  return withClient(pool, async (client, session) => {
    await client.query('select pg_advisory_lock(hashtextextended($1, 0))', [key]);
    try {
      return await fn(client);
    } finally {
      // A session that may not have let go is closed rather than pooled.
      await client.query('select pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch((err: Error) => session.discard(err));
    }
  });
}

export async function insertRelayerTransaction(db: Queryable, t: NewRelayerTransaction): Promise<RelayerTransactionRow> {
  return (await insertRelayerTransactions(db, [t]))[0];
}

/**
 * Records many signed transactions in one statement (one commit), returned in the order given.
 * A transaction signed again exactly as one recorded `failed` (never in any pool: refused, or
 * closed unsent when its round stopped) has its hash: with the same nonce, call, gas and fees
 * (no block between) signing gives the same bytes. That record is the one taken up again, pending.
 */
export async function insertRelayerTransactions(db: Queryable, ts: readonly NewRelayerTransaction[]): Promise<RelayerTransactionRow[]> {
  if (ts.length === 0) return [];
  const column = <T>(f: (t: NewRelayerTransaction) => T): T[] => ts.map(f);
  const { rows } = await db.query<RelayerTransactionRow>(
    `insert into relayer_transactions (chain_id, from_address, nonce, tx_hash, raw_tx, purpose, subject, contract_address, gas_limit,
       max_fee_per_gas, max_priority_fee_per_gas, sent_at_block, replaces_id)
     select t.chain_id, lower(t.from_address), t.nonce, lower(t.tx_hash), t.raw_tx, t.purpose, t.subject, lower(t.contract_address), t.gas_limit,
       t.max_fee_per_gas, t.max_priority_fee_per_gas, t.sent_at_block, t.replaces_id
     from unnest($1::int[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::numeric[], $10::numeric[],
       $11::numeric[], $12::bigint[], $13::bigint[])
       as t(chain_id, from_address, nonce, tx_hash, raw_tx, purpose, subject, contract_address, gas_limit, max_fee_per_gas,
         max_priority_fee_per_gas, sent_at_block, replaces_id)
     on conflict (tx_hash) do update set status = 'pending', error = null, sent_at_block = excluded.sent_at_block, updated_at = now()
       where relayer_transactions.status = 'failed'
     returning ${COLUMNS}`,
    [
      column((t) => t.chainId), column((t) => t.from), column((t) => t.nonce.toString()), column((t) => t.txHash), column((t) => t.rawTx),
      column((t) => t.purpose), column((t) => t.subject), column((t) => t.contract), column((t) => t.gasLimit.toString()),
      column((t) => t.maxFeePerGas.toString()), column((t) => t.maxPriorityFeePerGas.toString()), column((t) => t.sentAtBlock.toString()),
      column((t) => t.replacesId ?? null),
    ],
  );
  const byHash = new Map(rows.map((r) => [r.tx_hash, r]));
  return ts.map((t) => {
    const row = byHash.get(t.txHash.toLowerCase());
    if (!row) throw new Error(`relayer transaction ${t.txHash} (nonce ${t.nonce}) is recorded already and not failed: not recorded again`);
    return row;
  });
}

/** The transactions of the sequence not known to be settled (pending and replaced), by nonce then age. */
export async function openRelayerTransactions(db: Queryable, chainId: number, from: string): Promise<RelayerTransactionRow[]> {
  const { rows } = await db.query<RelayerTransactionRow>(
    `select ${COLUMNS} from relayer_transactions
     where chain_id = $1 and from_address = lower($2) and status in ('pending', 'replaced') order by relayer_transactions.nonce, relayer_transactions.id`,
    [chainId, from],
  );
  return rows;
}

/** The next nonce the records know of (one past the highest that reached a node), or 0. */
export async function nextRecordedNonce(db: Queryable, chainId: number, from: string): Promise<bigint> {
  const { rows } = await db.query<{ next: string }>(
    `select coalesce(max(nonce) + 1, 0)::text as next from relayer_transactions where chain_id = $1 and from_address = lower($2) and status <> 'failed'`,
    [chainId, from],
  );
  return BigInt(rows[0].next);
}

/** For each of `subjects`, the newest transaction doing it that is still in flight or succeeded (a second request returns it). */
export async function liveTransactionsFor(db: Queryable, chainId: number, from: string, subjects: readonly string[]): Promise<Map<string, RelayerTransactionRow>> {
  const { rows } = await db.query<RelayerTransactionRow>(
    `select distinct on (subject) ${COLUMNS} from relayer_transactions
     where chain_id = $1 and from_address = lower($2) and subject = any($3::text[]) and status in ('pending', 'replaced', 'mined')
     order by subject, relayer_transactions.id desc`,
    [chainId, from, subjects],
  );
  return new Map(rows.map((r) => [r.subject, r]));
}

/**
 * The settled transactions (mined or reverted) of nonces in [from, to): after a reorg a node may
 * have none of them any more, and the nonce would be a hole holding every later one back.
 */
export async function settledRelayerTransactions(db: Queryable, chainId: number, address: string, from: bigint, to: bigint): Promise<RelayerTransactionRow[]> {
  const { rows } = await db.query<RelayerTransactionRow>(
    `select ${COLUMNS} from relayer_transactions
     where chain_id = $1 and from_address = lower($2) and status in ('mined', 'reverted') and nonce >= $3 and nonce < $4 order by relayer_transactions.nonce, relayer_transactions.id`,
    [chainId, address, from.toString(), to.toString()],
  );
  return rows;
}

export async function countBroadcast(db: Queryable, id: string): Promise<void> {
  await countBroadcasts(db, [id]);
}

/** countBroadcast of many transactions in one statement. */
export async function countBroadcasts(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query('update relayer_transactions set broadcasts = broadcasts + 1, updated_at = now() where id = any($1::bigint[])', [ids]);
}

/** The error of a transaction closed by closeUnsent. */
export const NEVER_BROADCAST = 'never broadcast: an earlier transaction of its round stopped the round';

/**
 * Transactions recorded under the sequence lock and never broadcast (the round stopped before them):
 * `failed`, so their nonces are signed again. Only the hold that recorded them may say so.
 */
export async function closeUnsent(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query(
    `update relayer_transactions set status = 'failed', error = $2, updated_at = now()
     where id = any($1::bigint[]) and status = 'pending' and broadcasts = 0`,
    [ids, NEVER_BROADCAST],
  );
}

/** Settles many transactions in one statement (the node's verdicts of one settle). */
export async function setRelayerStatuses(db: Queryable, settled: readonly { id: string; status: RelayerTxStatus; minedBlock?: bigint }[]): Promise<void> {
  if (settled.length === 0) return;
  await db.query(
    `update relayer_transactions r set status = u.status, mined_block = coalesce(u.mined_block, r.mined_block), updated_at = now()
     from unnest($1::bigint[], $2::text[], $3::bigint[]) as u(id, status, mined_block)
     where r.id = u.id`,
    [settled.map((x) => x.id), settled.map((x) => x.status), settled.map((x) => x.minedBlock?.toString() ?? null)],
  );
}

export async function setRelayerStatus(db: Queryable, id: string, status: RelayerTxStatus, opts: { minedBlock?: bigint; error?: string } = {}): Promise<void> {
  await db.query('update relayer_transactions set status = $2, mined_block = coalesce($3, mined_block), error = coalesce($4, error), updated_at = now() where id = $1', [
    id, status, opts.minedBlock?.toString() ?? null, opts.error ?? null,
  ]);
}

/** A settled transaction the chain lost (a reorg), in flight again from block `head`. */
export async function reopenRelayerTransaction(db: Queryable, id: string, head: bigint): Promise<void> {
  await db.query(`update relayer_transactions set status = 'pending', mined_block = null, sent_at_block = $2, updated_at = now() where id = $1`, [id, head.toString()]);
}

/** Every transaction of one chain (tests and operators read them). */
export async function relayerTransactionsOf(db: Queryable, chainId: number): Promise<RelayerTransactionRow[]> {
  const { rows } = await db.query<RelayerTransactionRow>(`select ${COLUMNS} from relayer_transactions where chain_id = $1 order by relayer_transactions.nonce, relayer_transactions.id`, [chainId]);
  return rows;
}
