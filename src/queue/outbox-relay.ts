// Hands committed outbox rows to BullMQ. The API calls publish() right after its commit (fast
// path); the worker calls relay() on a timer for whatever the fast path could not hand over
// (a crash between commit and enqueue, Redis down). The job id makes a double hand-over a no-op.
import type { JobsOptions, Queue } from 'bullmq';
import { lockPendingOutbox, markEnqueued } from '../db/outbox.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { JOB_INVOICE_SEND } from './names.js';

const BATCH = 500;

/** Retries with exponential backoff for transient failures; permanent ones are UnrecoverableError. */
export const SEND_JOB_OPTIONS: JobsOptions = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 1_000 },
  removeOnComplete: { age: 24 * 3600, count: 50_000 },
  removeOnFail: { age: 14 * 24 * 3600 },
};

export interface OutboxRelay {
  /** Hands over the given outbox rows (fast path), or the oldest pending ones; returns how many. */
  relay(jobIds?: string[]): Promise<number>;
}

export function createOutboxRelay(pool: Pool, queues: { send: Queue }): OutboxRelay {
  const queueFor = (jobName: string): Queue => {
    if (jobName === JOB_INVOICE_SEND) return queues.send;
    throw new Error(`outbox row for unknown job ${jobName}`);
  };
  return {
    async relay(jobIds) {
      // The row locks keep two relays from handing over the same rows at once; rows another
      // relay holds are skipped, not waited for.
      return withTransaction(pool, async (tx) => {
        const rows = await lockPendingOutbox(tx, BATCH, jobIds);
        if (rows.length === 0) return 0;
        for (const name of new Set(rows.map((r) => r.job_name))) {
          const mine = rows.filter((r) => r.job_name === name);
          await queueFor(name).addBulk(mine.map((r) => ({ name, data: r.payload, opts: { ...SEND_JOB_OPTIONS, jobId: r.job_id } })));
        }
        await markEnqueued(tx, rows.map((r) => r.id));
        return rows.length;
      });
    },
  };
}
