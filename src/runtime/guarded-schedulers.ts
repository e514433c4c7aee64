// Upkeep jobs on job schedulers of their own (the reconciler, the idempotency-key pruner): one
// scheduler per id whatever the number of workers (an upsert), and put back if the queue store lost it, or
// nothing would run them again until a worker restarts.
import type { Logger } from '../log.js';
import type { AppQueue } from '../queue/backend.js';
import { JOBS, SCHEDULERS, type JobName } from '../queue/catalogue.js';

export interface GuardedSchedule {
  /** The scheduler id (catalogue SCHEDULERS). */
  id: string;
  /** A catalogue job: its payload is `data` (empty when not given). */
  job: JobName;
  data?: object;
  everyMs: number;
  /** For the log lines, e.g. 'reconciler'. */
  what: string;
}

export interface GuardedSchedulers {
  stop(): void;
}

/** Upserts each schedule now, then checks every `guardEveryMs` that each is still there. */
export async function startGuardedSchedulers(queue: AppQueue, schedules: GuardedSchedule[], guardEveryMs: number, log: Logger): Promise<GuardedSchedulers> {
  const upsert = (s: GuardedSchedule) => queue.upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.job, data: s.data ?? {}, opts: JOBS[s.job].options });
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

/** Removes the chain-watch schedulers of chains this deployment no longer watches. */
export async function removeStaleChainSchedulers(queue: AppQueue, keep: string[], log: Logger): Promise<void> {
  try {
    const schedulers = await queue.getJobSchedulers(0, -1);
    for (const s of schedulers) {
      const id = s.key;
      if (id.startsWith(SCHEDULERS.chainWatchPrefix) && !keep.includes(id)) {
        await queue.removeJobScheduler(id);
        log.info({ scheduler: id }, 'chain no longer watched: its scheduler is removed');
      }
    }
  } catch (err) {
    log.warn({ err }, 'could not list the chain schedulers; a stale one only runs to say "not watched"');
  }
}
