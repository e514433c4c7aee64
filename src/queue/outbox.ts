// The general transactional outbox. Any job of the catalogue can be recorded in the SAME
// Postgres transaction as the change that causes it, and reaches BullMQ after commit: at once
// through the fast path (the API publishes the returned job), or, if that fails or the process
// dies, through the worker's relay, which hands over every committed row not yet enqueued. A job
// is therefore never lost and never sent for a rolled-back change.
//
//   const job = await withTransaction(pool, async (tx) => {
//     const row = await someStateChange(tx, ...);
//     return enqueueInTransaction(tx, 'invoice.send', { invoiceId: row.id, deliveryId }, { fastPath: true });
//   });
//   await publishQuietly(deps, [job], req.log);   // fast path, in routes (http/route-helpers.ts)
//
// The relay leaves a row to its writer's fast path for a while (`fastPath`, FAST_PATH_HOLD_MS),
// so a job is normally handed over once. Handed over twice is still harmless: the job id (from
// the catalogue) makes the second add a no-op, and a handler must be idempotent anyway (BullMQ
// runs a job at least once).
import { insertOutbox } from '../db/outbox.js';
import type { PoolClient } from '../db/pool.js';
import { jobIdOf, JOBS, type JobName, type JobPayloads } from './catalogue.js';

/** A job recorded in the outbox: what the relay hands to BullMQ. */
export interface OutboxJob<N extends JobName = JobName> {
  job_name: N;
  job_id: string;
  payload: JobPayloads[N];
}

/** Hands committed outbox rows to the queue at once (the fast path); failures are left to the worker's relay. */
export interface OutboxPublisher {
  publish(jobs: readonly OutboxJob[]): Promise<void>;
}

/**
 * How long a row the caller will publish itself after commit (`fastPath`) is left to it, counted
 * from its write: the workers' relay skips the row meanwhile, so a job is not handed over twice.
 * A failed or timed-out publish (2 s) gives the row back at once (publishQuietly); the hold only
 * runs out if the caller's process dies before its publish, or the give-back itself fails. The
 * relay wakes when it ends.
 */
export const FAST_PATH_HOLD_MS = 10_000;

export interface EnqueueOptions {
  /** The job id; defaults to the catalogue's id for the payload. */
  jobId?: string;
  /** The caller publishes the job after commit (publishQuietly): hold the row from the relay. */
  fastPath?: boolean;
}

/**
 * Records job `name` with `payload` inside the transaction `tx` (a client from withTransaction).
 * A second row with the same id is ignored. Returns the job, to publish after commit.
 */
export async function enqueueInTransaction<N extends JobName>(
  tx: PoolClient,
  name: N,
  payload: JobPayloads[N],
  { jobId = jobIdOf(name, payload), fastPath = false }: EnqueueOptions = {},
): Promise<OutboxJob<N>> {
  if (JOBS[name].producedBy !== 'outbox') throw new Error(`job ${name} is not produced through the outbox (catalogue: ${JOBS[name].producedBy})`);
  await insertOutbox(tx, name, jobId, payload, fastPath ? FAST_PATH_HOLD_MS : null);
  return { job_name: name, job_id: jobId, payload };
}
