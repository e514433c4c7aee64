// The relayer's transactions (migration 1700000002100): one nonce sequence per chain and key,
// serialised across processes by a session advisory lock held while a transaction is signed,
// recorded and broadcast. The lock is the session's, not a transaction's, so the record commits
// before the broadcast (a crash between the two leaves a row to broadcast again) while the next
// sender still waits; a process that dies loses its session and with it the lock.
import type { Pool, PoolClient, Queryable } from './pool.js';

export type RelayerPurpose = 'charge' | 'cancel';
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
  status, replaces_id::text as replaces_id, sent_at_block::text as sent_at_block, broadcasts, mined_block::text as mined_block`;

/**
 * Runs fn holding the sequence lock of (chainId, from): every sender of that key on that chain, in
 * any process, waits here. fn gets the lock's own connection (queries on it commit one by one).
 */
export async function withSequenceLock<T>(pool: Pool, chainId: number, from: string, fn: (db: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const key = `relayer:${chainId}:${from.toLowerCase()}`;
  let broken: Error | undefined;
  // A checked-out client has no pool listener, and a hold spends most of its time between queries
  // (on the node): a session the server ends then (a failover, pg_terminate_backend) emits 'error',
  // which without a listener is an uncaught exception that kills the process. The lock went with
  // the session; fn's next query fails, and the client is closed rather than pooled.
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query('select pg_advisory_lock(hashtextextended($1, 0))', [key]);
    try {
      return await fn(client);
    } finally {
      await client.query('select pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch((err: Error) => {
        // The session cannot be trusted to have let go: it is closed rather than pooled.
        broken = err;
      });
    }
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

export async function insertRelayerTransaction(db: Queryable, t: NewRelayerTransaction): Promise<RelayerTransactionRow> {
  const { rows } = await db.query<RelayerTransactionRow>(
    `insert into relayer_transactions (chain_id, from_address, nonce, tx_hash, raw_tx, purpose, subject, contract_address, gas_limit,
       max_fee_per_gas, max_priority_fee_per_gas, sent_at_block, replaces_id)
     values ($1, lower($2), $3, lower($4), $5, $6, $7, lower($8), $9, $10, $11, $12, $13)
     returning ${COLUMNS}`,
    [
      t.chainId, t.from, t.nonce.toString(), t.txHash, t.rawTx, t.purpose, t.subject, t.contract, t.gasLimit.toString(),
      t.maxFeePerGas.toString(), t.maxPriorityFeePerGas.toString(), t.sentAtBlock.toString(), t.replacesId ?? null,
    ],
  );
  return rows[0];
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
  await db.query('update relayer_transactions set broadcasts = broadcasts + 1, updated_at = now() where id = $1', [id]);
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
