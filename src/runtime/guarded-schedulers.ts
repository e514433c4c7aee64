// The upkeep jobs (the reconciler, the prunes, the chain watches) on job schedulers of their own,
// as their catalogue entries' `schedule` asks: one scheduler per id whatever the number of workers
// (an upsert), and put back if the queue store lost it, or nothing would run them again until a
// worker restarts.
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { AppQueue } from '../queue/backend.js';
import { JOBS, SCHEDULED_JOBS, type JobName, type QueueName } from '../queue/catalogue.js';

interface GuardedSchedule {
  queue: AppQueue;
  /** The scheduler id. */
  id: string;
  job: JobName;
  data: object;
  everyMs: number;
  /** For the log lines, e.g. 'reconciler'. */
  what: string;
}

export interface GuardedSchedulers {
  stop(): void;
}

/**
 * Upserts the schedulers of every upkeep job of the catalogue on its queue (`queueOf`), after
 * removing those this configuration no longer names; then checks every `guardEveryMs` that each
 * is still there.
 */
export async function startUpkeepSchedulers(
  queueOf: (name: QueueName) => AppQueue,
  config: Config,
  guardEveryMs: number,
  log: Logger,
): Promise<GuardedSchedulers> {
  const schedules: GuardedSchedule[] = [];
  for (const job of SCHEDULED_JOBS) {
    const { schedule, queue: queueName } = JOBS[job];
    if (!schedule) continue;
    const queue = queueOf(queueName);
    const instances = schedule.instances(config);
    if (schedule.removeOthersWithPrefix !== undefined) {
      await removeOthers(queue, schedule.removeOthersWithPrefix, instances.map((i) => i.id), log);
    }
    const everyMs = schedule.everyMs(config);
    for (const i of instances) schedules.push({ queue, job, id: i.id, data: i.data, everyMs, what: i.what });
  }
  const upsert = (s: GuardedSchedule) => s.queue.upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.job, data: s.data, opts: JOBS[s.job].options });
  for (const s of schedules) {
    await upsert(s).catch((err) => log.warn({ err }, `could not set up the ${s.what} scheduler; will retry`));
  }
  const guard = setInterval(() => {
    for (const s of schedules) {
      s.queue
        .getJobScheduler(s.id)
        .then((found) => (found ? undefined : upsert(s).then(() => log.warn(`${s.what} scheduler was missing from the queue store; re-created`))))
        .catch((err) => log.warn({ err }, `could not check the ${s.what} scheduler; will retry`));
    }
  }, guardEveryMs);
  guard.unref();
  return { stop: () => clearInterval(guard) };
}

/** Removes the schedulers under `prefix` not in `keep` (the chain-watch ones of chains no longer watched). */
async function removeOthers(queue: AppQueue, prefix: string, keep: string[], log: Logger): Promise<void> {
  try {
    const schedulers = await queue.getJobSchedulers(0, -1);
    for (const s of schedulers) {
      const id = s.key;
      if (id.startsWith(prefix) && !keep.includes(id)) {
        await queue.removeJobScheduler(id);
        log.info({ scheduler: id }, 'scheduler no longer configured (a chain no longer watched): removed');
      }
    }
  } catch (err) {
    log.warn({ err }, `could not list the ${prefix}* schedulers; a stale one only runs to say "not watched"`);
  }
}
