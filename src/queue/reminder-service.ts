// Keeps the queue's reminder schedules and due-date jobs in step with Postgres, which is the truth.
// Used by the worker (after a send, on a stop notification, by the reconciler) and by the API
// (reminders on/off, paid through the test helper).
import type { AppQueue, QueueBackend } from './backend.js';
import { describePolicy, type ReminderPolicy } from '../domain/reminder-schedule.js';
import { remindersShouldRun } from '../domain/invoice-rules.js';
import { existingInvoiceIds, findReminderTarget, listReminderTargets, type ReminderTarget } from '../db/reminders.js';
import type { Queryable } from '../db/pool.js';
import { dueJobId, JOBS, type InvoiceDuePayload } from './catalogue.js';
import { createReminderSchedulers, invoiceIdOfReminderScheduler, reminderSchedulerId, type ReminderSchedulers } from './reminder-schedulers.js';

/** Reminders run for this invoice: the domain rule, and its invoice email went out (never a reminder before it). */
export function remindersRunFor(t: ReminderTarget): boolean {
  return t.invoice_emailed && remindersShouldRun({ status: t.status, remindersEnabled: t.reminders_enabled, dueAt: t.due_at });
}

export interface ReconcileReport {
  qualifying: number;
  schedulersCreated: number;
  schedulersRemoved: number;
  /** Schedulers under this prefix for invoices this database does not have: left alone. */
  schedulersForeign: number;
  dueJobsCreated: number;
  /** Schedulers re-planned because the configured policy changed since the last reconcile. */
  schedulersMoved: number;
}

export interface ReminderService {
  schedulers: ReminderSchedulers;
  /** After the invoice email: the due-date job, and the schedule from now on. */
  afterSend(invoiceId: string): Promise<void>;
  /** At the due date (after open -> overdue): moves the schedule to the after phase if reminders still run. */
  atDueDate(invoiceId: string): Promise<void>;
  /** Reminders turned off, invoice paid or void: remove its schedule. */
  stop(invoiceId: string): Promise<void>;
  /** Reminders turned on again: future slots only, no burst of missed ones. */
  resume(invoiceId: string): Promise<void>;
  /** Makes Redis match Postgres for every open and overdue invoice. */
  reconcile(): Promise<ReconcileReport>;
}

/** `store` gives the reconciler its bulk reads of the queue (one read each, on either backend) and its marker. */
export function createReminderService(
  db: Queryable,
  queue: AppQueue,
  store: Pick<QueueBackend, 'schedulerIds' | 'existingJobIds' | 'readMarker' | 'writeMarker'>,
  policy: ReminderPolicy,
): ReminderService {
  const schedulers = createReminderSchedulers(queue, policy, JOBS['invoice.reminder'].options);
  // An upper bound of the last post-due slot after the due date: a month counts 30 days in
  // Duration.toMillis, so allow 10% and two days (local hour, DST) on top.
  const planHorizonMs =
    (policy.afterStart.toMillis() + policy.afterEvery.toMillis() * Math.max(0, policy.afterMax - 1)) * 1.1 + 2 * 86_400_000;
  const target = (t: ReminderTarget) => ({ id: t.id, dueAt: t.due_at!, timeZone: t.time_zone });
  // The policy the schedules in Redis were last brought in line with. A scheduler stores the
  // policy it was planned with (its pattern), so after a restart with other REMINDERS_* values it
  // would keep firing the old plan while the timeline shows the new one: the reconcile that first
  // sees a new policy re-plans every open invoice's schedule, then records the policy.
  // Kept beside the schedules (lost with them): which policy they were planned under.
  const policyKey = 'reminder-policy';
  const policyId = JSON.stringify(describePolicy(policy));
  const runs = remindersRunFor;

  async function addDueJob(t: ReminderTarget): Promise<void> {
    const payload: InvoiceDuePayload = { invoiceId: t.id };
    await queue.add('invoice.due', payload, {
      ...JOBS['invoice.due'].options,
      jobId: dueJobId(t.id, t.due_at!),
      delay: Math.max(0, t.due_at!.getTime() - Date.now()),
    });
  }

  return {
    schedulers,
    async afterSend(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (!t || t.due_at === null) return;
      if (t.status === 'open') await addDueJob(t);
      if (runs(t)) {
        // A re-run of the send job must not re-plan a schedule that already advanced.
        const existing = await queue.getJobScheduler(reminderSchedulerId(t.id));
        if (!existing) await schedulers.schedule(target(t), new Date());
      }
    },
    async atDueDate(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (!t || !runs(t)) return;
      await schedulers.switchToAfter(target(t), new Date());
      // Paid (or reminders off) between the read above and the upsert: the stop notification may
      // have removed the old scheduler before the upsert made a new one. Read again; a change
      // committed after this read notifies the workers after the upsert, so it cannot be missed.
      const again = await findReminderTarget(db, invoiceId);
      if (!again || !runs(again)) await schedulers.cancel(invoiceId);
    },
    async stop(invoiceId) {
      await schedulers.cancel(invoiceId);
    },
    async resume(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (t && runs(t)) await schedulers.schedule(target(t), new Date());
    },
    async reconcile() {
      // Scheduler ids live in the queue's `repeat` sorted set; one read for all of them. Redis is
      // read BEFORE Postgres: an invoice paid (and its scheduler removed) between the two reads is
      // then seen paid and left alone; read the other way round it would look qualifying and
      // missing, and be put back on a schedule. Likewise a schedule created between the reads is
      // at worst upserted again, never removed.
      const present = new Set(await store.schedulerIds(queue));
      const policyChanged = (await store.readMarker(queue, policyKey)) !== policyId;
      const targets = await listReminderTargets(db);
      const report: ReconcileReport = { qualifying: 0, schedulersCreated: 0, schedulersRemoved: 0, schedulersForeign: 0, dueJobsCreated: 0, schedulersMoved: 0 };
      const planned: ReminderTarget[] = [];
      const wanted = new Set<string>();
      const now = Date.now();
      for (const t of targets) {
        if (!runs(t)) continue;
        report.qualifying++;
        const id = reminderSchedulerId(t.id);
        wanted.add(id);
        if (present.has(id)) {
          if (policyChanged) planned.push(t);
          continue;
        }
        // Lost from Redis: plan again from just after the last recorded reminder, so a slot
        // missed during the outage still goes out (once: deliveries dedup by slot).
        const from = new Date(Math.min(now, (t.last_slot_at ?? t.sent_at ?? new Date(now)).getTime() + 1));
        // Most invoices without a scheduler simply used up their plan: skip them without the
        // calendar arithmetic or a Redis call (this loop runs over every overdue invoice).
        if (t.due_at!.getTime() + planHorizonMs < from.getTime()) continue;
        if (await schedulers.schedule(target(t), from)) report.schedulersCreated++;
      }
      // Only schedulers of this database's own invoices are removed: one of an invoice this
      // database does not have belongs to another deployment sharing the prefix (see
      // prefix-claim.ts), and removing it would silently stop that deployment's reminders.
      const unwanted = [...present]
        .filter((id) => !wanted.has(id))
        .map(invoiceIdOfReminderScheduler)
        .filter((id): id is string => id !== null);
      const ours = await existingInvoiceIds(db, unwanted);
      for (const invoiceId of unwanted) {
        if (!ours.has(invoiceId)) {
          report.schedulersForeign++;
          continue;
        }
        await schedulers.cancel(invoiceId);
        report.schedulersRemoved++;
      }
      if (policyChanged) {
        for (let i = 0; i < planned.length; i += 200) {
          const batch = planned.slice(i, i + 200);
          const current = await Promise.all(batch.map((t) => queue.getJobScheduler(reminderSchedulerId(t.id))));
          for (const [j, t] of batch.entries()) {
            const found = current[j];
            if (!found || schedulers.followsPolicy(found.pattern, t.due_at!)) continue;
            // From now on, under the new policy: slots already sent stay sent (and a slot is
            // deduplicated in deliveries anyway), missed slots of the new plan are not caught
            // up, so no burst; the next email is the new plan's first slot from now.
            await schedulers.schedule(target(t), new Date());
            report.schedulersMoved++;
          }
        }
        // Only once every schedule follows it: a failure above leaves the next reconcile to finish.
        await store.writeMarker(queue, policyKey, policyId);
      }
      const open = targets.filter((t) => t.status === 'open');
      const exists = await store.existingJobIds(queue, open.map((t) => dueJobId(t.id, t.due_at!)));
      for (const t of open) {
        if (!exists.has(dueJobId(t.id, t.due_at!))) {
          await addDueJob(t);
          report.dueJobsCreated++;
        }
      }
      return report;
    },
  };
}
