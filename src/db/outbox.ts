// The transactional outbox: a job is recorded in the same transaction as the change that needs
// it, and handed to BullMQ after commit by the API (fast path) or by the worker's relay.
import type { Queryable } from './pool.js';

export interface OutboxRow {
  id: string;
  job_name: string;
  job_id: string;
  payload: Record<string, unknown>;
}

export async function insertOutbox(db: Queryable, jobName: string, jobId: string, payload: object): Promise<void> {
  await db.query('insert into outbox (job_name, job_id, payload) values ($1, $2, $3) on conflict (job_id) do nothing', [
    jobName, jobId, JSON.stringify(payload),
  ]);
}

/** The receipt job the database queued when this invoice turned paid, if not handed over yet. */
export async function pendingReceiptJob(db: Queryable, invoiceId: string): Promise<{ job_id: string; delivery_id: string } | null> {
  const { rows } = await db.query<{ job_id: string; delivery_id: string }>(
    `select job_id, payload->>'deliveryId' as delivery_id from outbox
     where job_name = 'invoice.receipt' and payload->>'invoiceId' = $1 and enqueued_at is null`,
    [invoiceId],
  );
  return rows[0] ?? null;
}

/** Oldest rows not yet handed over to BullMQ (rows set aside excluded). */
export async function pendingOutbox(db: Queryable, limit: number): Promise<OutboxRow[]> {
  // Ordered by the table's id: the select's id is text, and "10" sorts before "9".
  const { rows } = await db.query<OutboxRow>(
    'select id::text as id, job_name, job_id, payload from outbox where enqueued_at is null and failed_at is null order by outbox.id limit $1',
    [limit],
  );
  return rows;
}

/**
 * Sets pending rows aside for good (the relay skips them from now on); returns the rows this call
 * set aside, so a row seen by two relays at once is reported once.
 */
export async function setOutboxRowsAside(db: Queryable, ids: string[], reason: string): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `update outbox set failed_at = now(), failed_reason = $2
      where id = any($1::bigint[]) and enqueued_at is null and failed_at is null
     returning id::text as id, job_name, job_id, payload`,
    [ids, reason],
  );
  return rows;
}

export async function markEnqueued(db: Queryable, jobIds: string[]): Promise<void> {
  await db.query('update outbox set enqueued_at = now() where job_id = any($1::text[]) and enqueued_at is null', [jobIds]);
}

export async function countPendingOutbox(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select count(*)::int as n from outbox where enqueued_at is null and failed_at is null');
  return rows[0].n;
}
