// Upkeep jobs on job schedulers of their own (the reconciler, the idempotency-key pruner): one
// scheduler per id whatever the number of workers (an upsert), and put back if the queue store lost it, or
// nothing would run them again until a worker restarts.
import type { Logger } from '../log.js';
import type { AppQueue } from '../queue/backend.js';
import { JOBS, type JobName } from '../queue/catalogue.js';

export interface GuardedSchedule {
  /** The scheduler id (catalogue SCHEDULERS). */
  id: string;
  /** A catalogue job with an empty payload. */
  job: JobName;
  everyMs: number;
  /** For the log lines, e.g. 'reconciler'. */
  what: string;
}

export interface GuardedSchedulers {
  stop(): void;
}

/** Upserts each schedule now, then checks every `guardEveryMs` that each is still there. */
export async function startGuardedSchedulers(queue: AppQueue, schedules: GuardedSchedule[], guardEveryMs: number, log: Logger): Promise<GuardedSchedulers> {
  const upsert = (s: GuardedSchedule) => queue.upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.job, data: {}, opts: JOBS[s.job].options });
  for (const s of schedules) {
    await upsert(s).catch((err) => log.warn({ err }, `could not set up the ${s.what} scheduler; will retry`));
  }
  const guard = setInterval(() => {
    for (const s of schedules) {
      queue
        .getJobScheduler(s.id)
        .then((found) => (found ? undefined : upsert(s).then(() => log.warn(`${s.what} scheduler was missing from the queue store; re-created`))))
        .catch((err) => log.warn({ err }, `could not check the ${s.what} scheduler; will retry`));
    }
  }, guardEveryMs);
  guard.unref();
  return { stop: () => clearInterval(guard) };
}
