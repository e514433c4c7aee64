// Keeps the reminder schedules in Redis converging on Postgres from the worker: removes an
// invoice's schedule the moment Postgres says it stopped qualifying (LISTEN), runs the
// reconciler on its own job scheduler (in reminder shard 0), at start, and puts that scheduler
// back if Redis lost it; every RECONCILE_EVERY it also refreshes the shard membership and starts
// consuming shards another process's count added.
import { listen } from '../db/listen.js';
import type { Logger } from '../log.js';
import { JOBS, SCHEDULERS } from '../queue/catalogue.js';
import type { ReminderService } from '../queue/reminder-service.js';

/** The channel of the stop trigger (migration 1700000000001). */
export const REMINDER_CHANNEL = 'invoice_reminders_stop';

export interface ReminderUpkeep {
  stop(): Promise<void>;
}

export async function startReminderUpkeep(
  databaseUrl: string,
  reminders: ReminderService,
  reconcileEveryMs: number,
  log: Logger,
  /** Called with the shard count to consume after each membership refresh. */
  consume: (shards: number) => void,
): Promise<ReminderUpkeep> {
  const queue = reminders.shards.queues.shard(0);
  // Paid, void or reminders off, by whatever path: remove the schedulers within a second.
  const stopListener = listen(
    databaseUrl,
    REMINDER_CHANNEL,
    (invoiceId) => {
      reminders.stop(invoiceId).then(
        () => log.info({ invoice_id: invoiceId }, 'reminders stopped'),
        (err) => log.warn({ err, invoice_id: invoiceId }, 'could not stop reminders now; the job re-check and reconciler will'),
      );
    },
    log,
  );

  // The reconciler runs on its own scheduler (one per queue, whatever the number of workers),
  // and once at start: a worker that starts after a Redis loss repairs it straight away.
  const upsertReconciler = () =>
    queue.upsertJobScheduler(
      SCHEDULERS.reconcile,
      { every: reconcileEveryMs },
      { name: 'reminders.reconcile', data: {}, opts: JOBS['reminders.reconcile'].options },
    );
  await upsertReconciler().catch((err) => log.warn({ err }, 'could not set up the reconciler scheduler; will retry'));
  // A Redis loss takes the reconciler's own scheduler with it: put it back, or nothing would
  // ever repair Redis until a worker restarts.
  const reconcilerGuard = setInterval(() => {
    reminders.shards.refresh().then(
      (layout) => consume(layout.consumed),
      (err) => log.warn({ err }, 'could not refresh the reminder shard membership; will retry'),
    );
    queue
      .getJobScheduler(SCHEDULERS.reconcile)
      .then((found) => (found ? undefined : upsertReconciler().then(() => log.warn('reconciler scheduler was missing from Redis; re-created'))))
      .catch((err) => log.warn({ err }, 'could not check the reconciler scheduler; will retry'));
  }, reconcileEveryMs);
  reconcilerGuard.unref();
  reminders.reconcile().then(
    (report) => log.info({ ...report }, 'reminders reconciled at start'),
    (err) => log.warn({ err }, 'reconcile at start failed'),
  );

  return {
    async stop() {
      clearInterval(reconcilerGuard);
      await stopListener.close();
      await reminders.shards.leave().catch((err) => log.warn({ err }, 'could not leave the reminder shard membership'));
    },
  };
}
