// `reminders.reconcile`: on its own job scheduler (RECONCILE_EVERY). Postgres is the truth:
// recreates lost schedulers and due-date jobs, removes schedulers of invoices that no longer
// qualify. After a Redis FLUSHALL or a restart without persistence, this brings reminders back.
// It also owes the receipts of fan-out rows whose `invoice.receipts` job never did (lost with
// Redis, out of attempts, or set aside by an older worker), and hands over again the jobs of
// emails owed whose delivery has not moved for long (lost with Redis): the same repair for the
// same losses.
import { handUnsentAgain, oweStrandedReceipts } from '../src/db/outbox.js';
import { EMAIL_JOB_ATTEMPTS, EMAIL_JOB_OF_DELIVERY } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

/**
 * A fan-out row handed over this long ago and still there is stranded. Its job takes well under a
 * second; the margin covers a send queue backed up behind it (owing early is harmless: the job,
 * when it runs, owes nothing twice).
 */
const FAN_OUT_STRANDED_AFTER_MS = 10 * 60_000;
/** Fan-out rows owed per run (500 invoices each); more wait for the next run. */
const FAN_OUT_ROWS_PER_RUN = 20;
/**
 * An email owed whose delivery has not moved for this long has lost its job, or waits behind a
 * long backlog (handing it over again is then a no-op). A live job touches its delivery at every
 * attempt, at most 10 minutes apart (its capped back-off).
 */
const UNSENT_HANDED_AGAIN_AFTER_MS = 30 * 60_000;
const UNSENT_PER_RUN = 500;

export const remindersReconcile: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const report = await ctx.reminders.reconcile();
  if (report.schedulersMoved) ctx.log.info({ moved: report.schedulersMoved }, 'reminder schedules moved to the configured policy');
  if (report.schedulersCreated || report.schedulersRemoved || report.dueJobsCreated) {
    ctx.log.warn({ ...report }, 'reconciler repaired the queue: reminder schedulers or due jobs were missing or stale');
  }
  if (report.schedulersForeign) {
    ctx.log.warn({ ...report }, 'schedulers of invoices this database does not have share this REDIS_PREFIX; left alone (give each deployment its own prefix)');
  }
  const stranded = await oweStrandedReceipts(ctx.pool, FAN_OUT_STRANDED_AFTER_MS, FAN_OUT_ROWS_PER_RUN);
  if (stranded.rows > 0) {
    ctx.log.warn({ fan_out_rows: stranded.rows, receipts_owed: stranded.owed }, 'reconciler owed the receipts of fan-out jobs that never ran to the end');
  }
  const handedAgain = await handUnsentAgain(ctx.pool, EMAIL_JOB_OF_DELIVERY, { olderThanMs: UNSENT_HANDED_AGAIN_AFTER_MS, maxAttempts: EMAIL_JOB_ATTEMPTS, limit: UNSENT_PER_RUN });
  if (handedAgain > 0) {
    ctx.log.warn({ emails: handedAgain }, 'reconciler handed over again the jobs of emails owed whose delivery had not moved for 30 minutes (a job lost with the queue store, or a long backlog)');
  }
  return JSON.stringify({ ...report, fanOutRowsOwed: stranded.rows, receiptsOwed: stranded.owed, emailsHandedAgain: handedAgain });
};
