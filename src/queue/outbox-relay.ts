// Hands committed outbox rows to BullMQ, whatever catalogue job they hold: each goes to the
// catalogue's queue for its name with the catalogue's default options and the row's job id. The
// API publishes a row right after its commit (fast path); the worker relays, on a timer,
// whatever the fast path could not hand over (a crash between commit and enqueue, Redis down).
// No database lock is held while Redis is called: a row handed over twice is harmless, since
// its job id makes the second add a no-op.
import { markEnqueued, pendingOutbox } from '../db/outbox.js';
import type { Queryable } from '../db/pool.js';
import { isJobName, JOBS } from './catalogue.js';
import type { OutboxJob } from './outbox.js';
import { queueNamed, type QueueSet } from './queues.js';

const BATCH = 500;

export interface OutboxRelay {
  /** Adds these jobs to their queues and marks their rows handed over. */
  publish(jobs: readonly OutboxJob[]): Promise<void>;
  /** Hands over the oldest pending rows; returns how many. */
  relay(): Promise<number>;
}

export function createOutboxRelay(db: Queryable, queues: QueueSet): OutboxRelay {
  async function publish(jobs: readonly OutboxJob[]): Promise<void> {
    if (jobs.length === 0) return;
    for (const name of new Set(jobs.map((j) => j.job_name))) {
      if (!isJobName(name)) throw new Error(`outbox row for unknown job ${name}`);
      const spec = JOBS[name];
      const mine = jobs.filter((j) => j.job_name === name);
      await queueNamed(queues, spec.queue).addBulk(mine.map((j) => ({ name, data: j.payload, opts: { ...spec.options, jobId: j.job_id } })));
    }
    await markEnqueued(db, jobs.map((j) => j.job_id));
  }
  return {
    publish,
    async relay() {
      const rows = await pendingOutbox(db, BATCH);
      // Names are checked in publish(); payloads were typed by the catalogue when written.
      await publish(rows as unknown as OutboxJob[]);
      return rows.length;
    },
  };
}
