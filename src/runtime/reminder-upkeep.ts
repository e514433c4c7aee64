// Keeps the reminder schedules in Redis converging on Postgres from the worker: removes an
// invoice's schedule the moment Postgres says it stopped qualifying (LISTEN), reconciles once at
// start (then on its own job scheduler in reminder shard 0, see guarded-schedulers.ts), and every
// RECONCILE_EVERY refreshes the reminder shard membership, consuming shards another process's
// count added.
import { listen } from '../db/listen.js';
import type { Logger } from '../log.js';
import type { ReminderService } from '../queue/reminder-service.js';

/** The channel of the stop trigger (migration 1700000000001). */
export const REMINDER_CHANNEL = 'invoice_reminders_stop';

export interface ReminderUpkeep {
  stop(): Promise<void>;
}

export function startReminderUpkeep(
  databaseUrl: string,
  reminders: ReminderService,
  log: Logger,
  membership: { everyMs: number; /** Called with the shard count to consume after each refresh. */ consume: (shards: number) => void },
): ReminderUpkeep {
  // Paid, void or reminders off, by whatever path: remove the schedulers within a second.
  const stopListener = listen(
    databaseUrl,
    REMINDER_CHANNEL,
    (invoiceId) => {
      if (!invoiceId) return;
      reminders.stop(invoiceId).then(
        () => log.info({ invoice_id: invoiceId }, 'reminders stopped'),
        (err) => log.warn({ err, invoice_id: invoiceId }, 'could not stop reminders now; the job re-check and reconciler will'),
      );
    },
    log,
  );

  const heartbeat = setInterval(() => {
    reminders.shards.refresh().then(
      (layout) => membership.consume(layout.consumed),
      (err) => log.warn({ err }, 'could not refresh the reminder shard membership; will retry'),
    );
  }, membership.everyMs);
  heartbeat.unref();
  // A worker that starts after a Redis loss repairs it straight away.
  reminders.reconcile().then(
    (report) => log.info({ ...report }, 'reminders reconciled at start'),
    (err) => log.warn({ err }, 'reconcile at start failed'),
  );

  return {
    async stop() {
      clearInterval(heartbeat);
      await stopListener.close();
      await reminders.shards.leave().catch((err) => log.warn({ err }, 'could not leave the reminder shard membership'));
    },
  };
}
