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

/**
 * Oldest rows not yet handed over, locked so two relays never publish the same batch at once
 * (publishing twice would be harmless: the job id makes the second add a no-op).
 */
export async function lockPendingOutbox(db: Queryable, limit: number, jobIds?: string[]): Promise<OutboxRow[]> {
  const { rows } = await db.query<OutboxRow>(
    `select id::text as id, job_name, job_id, payload from outbox
     where enqueued_at is null and ($2::text[] is null or job_id = any($2))
     order by id limit $1 for update skip locked`,
    [limit, jobIds ?? null],
  );
  return rows;
}

export async function markEnqueued(db: Queryable, ids: string[]): Promise<void> {
  await db.query('update outbox set enqueued_at = now() where id = any($1::bigint[])', [ids]);
}

export async function countPendingOutbox(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select count(*)::int as n from outbox where enqueued_at is null');
  return rows[0].n;
}
