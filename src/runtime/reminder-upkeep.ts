// Keeps the reminder schedules in Redis converging on Postgres from the worker: removes an
// invoice's schedule the moment Postgres says it stopped qualifying (LISTEN), and reconciles once
// at start (then on its own job scheduler, see guarded-schedulers.ts).
import { listen } from '../db/listen.js';
import type { Logger } from '../log.js';
import type { ReminderService } from '../queue/reminder-service.js';

/** The channel of the stop trigger (migration 1700000000001). */
export const REMINDER_CHANNEL = 'invoice_reminders_stop';

export interface ReminderUpkeep {
  stop(): Promise<void>;
}

export function startReminderUpkeep(databaseUrl: string, reminders: ReminderService, log: Logger): ReminderUpkeep {
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

  // A worker that starts after a Redis loss repairs it straight away.
  reminders.reconcile().then(
    (report) => log.info({ ...report }, 'reminders reconciled at start'),
    (err) => log.warn({ err }, 'reconcile at start failed'),
  );

  return {
    async stop() {
      await stopListener.close();
    },
  };
}
