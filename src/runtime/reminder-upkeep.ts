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
/** Invoices per bulk stop: one statement per shard each (bounded, so one lock set stays short). */
const STOP_BATCH = 1000;

export interface ReminderUpkeep {
  stop(): Promise<void>;
}

export function startReminderUpkeep(
  databaseUrl: string,
  reminders: ReminderService,
  log: Logger,
  membership: { everyMs: number; /** Called with the shard count to consume after each refresh. */ consume: (shards: number) => void },
): ReminderUpkeep {
  // Paid, void or reminders off, by whatever path: remove the schedulers within a second. The
  // notifications are taken in batches: one arriving alone is removed at once; those arriving
  // while a removal runs (one UPDATE paying thousands sends thousands) wait for it and go
  // together in the next, one bulk removal per shard instead of one call each (on Postgres one
  // commit per scheduler was most of the time of a bulk cancel, issue 28).
  const pending = new Set<string>();
  let draining: Promise<void> | null = null;
  const stopOne = (invoiceId: string) =>
    reminders.stop(invoiceId).then(
      () => log.info({ invoice_id: invoiceId }, 'reminders stopped'),
      (err: unknown) => log.warn({ err, invoice_id: invoiceId }, 'could not stop reminders now; the job re-check and reconciler will'),
    );
  const drain = async () => {
    while (pending.size > 0) {
      const batch: string[] = [];
      for (const id of pending) {
        batch.push(id);
        if (batch.length === STOP_BATCH) break;
      }
      for (const id of batch) pending.delete(id);
      try {
        await reminders.stopMany(batch);
        for (const invoiceId of batch) log.info({ invoice_id: invoiceId }, 'reminders stopped');
      } catch (err) {
        // One by one, so one invoice's failure is reported as its own and the others still go.
        log.warn({ err, invoices: batch.length }, 'bulk reminder stop failed; stopping one by one');
        for (let i = 0; i < batch.length; i += 50) await Promise.all(batch.slice(i, i + 50).map(stopOne));
      }
    }
  };
  const stopListener = listen(
    databaseUrl,
    REMINDER_CHANNEL,
    (invoiceId) => {
      if (!invoiceId) return;
      pending.add(invoiceId);
      draining ??= drain().finally(() => (draining = null));
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
      await draining;
      await reminders.shards.leave().catch((err) => log.warn({ err }, 'could not leave the reminder shard membership'));
    },
  };
}
