// Hands committed outbox rows to BullMQ. The API publishes a row right after its commit (fast
// path); the worker relays, on a timer, whatever the fast path could not hand over (a crash
// between commit and enqueue, Redis down). No database lock is held while Redis is called: a
// row handed over twice is harmless, since its job id makes the second add a no-op, and the
// delivery row keeps a rerun from sending twice.
import type { JobsOptions } from 'bullmq';
import { markEnqueued, pendingOutbox, type OutboxRow } from '../db/outbox.js';
import type { Queryable } from '../db/pool.js';
import { CAPPED_BACKOFF } from './backoff.js';
import { JOB_INVOICE_SEND } from './names.js';
import type { AppQueue } from './backend.js';

const BATCH = 500;

/**
 * Transient failures are retried, backing off up to 10 min between attempts (about 16 hours in
 * all); permanent ones fail at once as UnrecoverableError.
 */
export const SEND_JOB_OPTIONS: JobsOptions = {
  attempts: 100,
  backoff: { type: CAPPED_BACKOFF },
  removeOnComplete: { age: 24 * 3600, count: 50_000 },
  removeOnFail: { age: 14 * 24 * 3600 },
};

export type OutboxJob = Pick<OutboxRow, 'job_name' | 'job_id' | 'payload'>;

export interface OutboxRelay {
  /** Adds these jobs to their queues and marks their rows handed over. */
  publish(jobs: OutboxJob[]): Promise<void>;
  /** Hands over the oldest pending rows; returns how many. */
  relay(): Promise<number>;
}

export function createOutboxRelay(db: Queryable, queues: { send: AppQueue }): OutboxRelay {
  const queueFor = (jobName: string): AppQueue => {
    if (jobName === JOB_INVOICE_SEND) return queues.send;
    throw new Error(`outbox row for unknown job ${jobName}`);
  };
  async function publish(jobs: OutboxJob[]): Promise<void> {
    if (jobs.length === 0) return;
    for (const name of new Set(jobs.map((j) => j.job_name))) {
      const mine = jobs.filter((j) => j.job_name === name);
      await queueFor(name).addBulk(mine.map((j) => ({ name, data: j.payload, opts: { ...SEND_JOB_OPTIONS, jobId: j.job_id } })));
    }
    await markEnqueued(db, jobs.map((j) => j.job_id));
  }
  return {
    publish,
    async relay() {
      const rows = await pendingOutbox(db, BATCH);
      await publish(rows);
      return rows.length;
    },
  };
}
