// Hands committed outbox rows to BullMQ, whatever catalogue job they hold: each goes to the
// catalogue's queue for its name with the catalogue's default options and the row's job id. The
// API publishes a row right after its commit (fast path; the row is held from the relay
// meanwhile); the worker relays, woken by the commit or on a timer, every other row and whatever
// the fast path could not hand over (a crash between commit and enqueue, Redis down).
// No database lock is held while Redis is called: a row handed over twice is harmless, since
// its job id makes the second add a no-op. A row no retry can hand over (a job name the catalogue
// does not know) is set aside, reported once through `onSetAside`, and the rest flows on.
import { markEnqueued, nextHoldEndMs, pendingOutbox, setOutboxRowsAside, type OutboxRow } from '../db/outbox.js';
import { withTimeout } from '../lib/with-timeout.js';
import type { Queryable } from '../db/pool.js';
import { isJobName, JOBS } from './catalogue.js';
import type { OutboxJob, OutboxPublisher } from './outbox.js';
import { queueNamed, type QueueSet } from './queues.js';

const BATCH = 500;
// Below this many jobs of one name, each is added on its own. On the Postgres backend a bulk add
// builds two temporary tables whatever its size (about 10 ms of the database's CPU for one job,
// beside 0.5 ms for a single add); from about 20 jobs up the bulk statement is the cheaper.
// The API hands over one job a request, the relay usually one or two a pass.
const BULK_FROM = 16;

export interface OutboxRelay {
  /** Adds these jobs to their queues and marks their rows handed over. */
  publish(jobs: readonly OutboxJob[]): Promise<void>;
  /** Hands over the oldest pending rows; returns how many it took off the pending list. */
  relay(): Promise<number>;
  /** In how many ms the earliest hold of a pending row ends (null: no row is held). */
  nextHoldEnd(): Promise<number | null>;
}

/** Why a row was set aside (the `reason` label of the metric, `outbox.failed_reason`). */
export const UNKNOWN_JOB = 'unknown_job';

export interface OutboxRelayOptions {
  /** Rows this relay set aside (each reported by exactly one relay, once). */
  onSetAside?(rows: readonly OutboxRow[], reason: typeof UNKNOWN_JOB): void;
}

export function createOutboxRelay(db: Queryable, queues: QueueSet, opts: OutboxRelayOptions = {}): OutboxRelay {
  async function publish(jobs: readonly OutboxJob[]): Promise<void> {
    if (jobs.length === 0) return;
    for (const name of new Set(jobs.map((j) => j.job_name))) {
      if (!isJobName(name)) throw new Error(`outbox row for unknown job ${name}`);
      const spec = JOBS[name];
      const mine = jobs.filter((j) => j.job_name === name);
      const queue = queueNamed(queues, spec.queue);
      if (mine.length >= BULK_FROM) {
        await queue.addBulk(mine.map((j) => ({ name, data: j.payload, opts: { ...spec.options, jobId: j.job_id } })));
      } else {
        for (const j of mine) await queue.add(name, j.payload, { ...spec.options, jobId: j.job_id });
      }
    }
    await markEnqueued(db, jobs.map((j) => j.job_id));
  }
  return {
    publish,
    async relay() {
      const rows = await pendingOutbox(db, BATCH);
      const unknown = rows.filter((r) => !isJobName(r.job_name));
      if (unknown.length > 0) {
        const setAside = await setOutboxRowsAside(db, unknown.map((r) => r.id), UNKNOWN_JOB);
        if (setAside.length > 0) opts.onSetAside?.(setAside, UNKNOWN_JOB);
      }
      // Payloads were typed by the catalogue when written.
      await publish(rows.filter((r) => isJobName(r.job_name)) as unknown as OutboxJob[]);
      return rows.length;
    },
    nextHoldEnd: () => nextHoldEndMs(db),
  };
}

/** The API's fast path: hands a request's committed jobs over at once, giving up after `timeoutMs`. */
export function fastPathPublisher(relay: Pick<OutboxRelay, 'publish'>, timeoutMs: number): OutboxPublisher {
  return { publish: (jobs) => withTimeout(relay.publish(jobs), timeoutMs, 'enqueue') };
}
