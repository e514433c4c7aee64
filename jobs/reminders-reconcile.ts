// `reminders.reconcile`: on its own job scheduler (RECONCILE_EVERY). Postgres is the truth:
// recreates lost schedulers and due-date jobs, removes schedulers of invoices that no longer
// qualify. After a Redis FLUSHALL or a restart without persistence, this brings reminders back.
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const remindersReconcile: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const report = await ctx.reminders.reconcile();
  if (report.schedulersMoved) ctx.log.info({ moved: report.schedulersMoved }, 'reminder schedules moved to the configured policy');
  if (report.schedulersCreated || report.schedulersRemoved || report.dueJobsCreated) {
    ctx.log.warn({ ...report }, 'reconciler repaired the queue: reminder schedulers or due jobs were missing or stale');
  }
  if (report.schedulersForeign) {
    ctx.log.warn({ ...report }, 'schedulers of invoices this database does not have share this REDIS_PREFIX; left alone (give each deployment its own prefix)');
  }
  return JSON.stringify(report);
};
