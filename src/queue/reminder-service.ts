// Keeps the queue's reminder schedules and due-date jobs in step with Postgres, which is the truth.
// Used by the worker (after a send, on a stop notification, by the reconciler) and by the API
// (reminders on/off, paid through the test helper). An invoice's scheduler and due-date job live
// in its reminder shard (reminder-shards.ts); while the shard count changes, the placement rules
// of reminder-placement.ts say where else they may be.
import type { AppQueue, QueueBackend } from './backend.js';
import { describePolicy, type ReminderPolicy } from '../domain/reminder-schedule.js';
import { remindersShouldRun } from '../domain/invoice-rules.js';
import { existingInvoiceIds, findReminderTarget, listReminderTargets, type ReminderTarget } from '../db/reminders.js';
import type { Queryable } from '../db/pool.js';
import { dueJob, dueJobId, JOBS } from './catalogue.js';
import { forgettable, inPlace, placementsOf } from './reminder-placement.js';
import { createReminderSchedulers, invoiceIdOfReminderScheduler, reminderSchedulerId, type FiredReminder, type ReminderSchedulers } from './reminder-schedulers.js';
import type { ReminderShardSet } from './reminder-shard-set.js';
import { reminderShardOf, shardOfQueueName } from './reminder-shards.js';

/** Reminders run for this invoice: the domain rule, and its invoice email went out (never a reminder before it). */
export function remindersRunFor(t: ReminderTarget): boolean {
  return t.invoice_emailed && remindersShouldRun({ status: t.status, remindersEnabled: t.reminders_enabled, dueAt: t.due_at });
}

export interface ReconcileReport {
  qualifying: number;
  schedulersCreated: number;
  /** Schedulers moved to the invoice's shard after a change of the shard count. */
  schedulersResharded: number;
  /** Schedulers re-planned because the configured policy changed since the last reconcile. */
  schedulersMoved: number;
  schedulersRemoved: number;
  /** Schedulers under this prefix for invoices this database does not have: left alone. */
  schedulersForeign: number;
  dueJobsCreated: number;
  /** Stale shard members forgotten (their extra shards drained). */
  membersForgotten: number;
}

/** Keeps the queue's reminder schedules in step with a change just committed (the API's, the invoicing service's). */
export type ReminderControl = Pick<ReminderService, 'stop' | 'resume'>;

export interface ReminderService {
  shards: ReminderShardSet;
  /** The schedulers of one shard. */
  schedulersOf(shard: number): ReminderSchedulers;
  /** The queue of this invoice's shard under this process's count. */
  queueOf(invoiceId: string): AppQueue;
  /** After the invoice email: the due-date job, and the schedule from now on. */
  afterSend(invoiceId: string): Promise<void>;
  /** At the due date (after open -> overdue): moves the schedule to the after phase if reminders still run. */
  atDueDate(invoiceId: string): Promise<void>;
  /** Reminders turned off, invoice paid or void: remove its schedule, wherever it is. */
  stop(invoiceId: string): Promise<void>;
  /** stop() for many invoices at once: one bulk removal per shard (one statement on Postgres). */
  stopMany(invoiceIds: string[]): Promise<void>;
  /** Reminders turned on again: future slots only, no burst of missed ones. */
  resume(invoiceId: string): Promise<void>;
  /** The job's slot was planned under this process's policy (issue: policy changes at reconcile). */
  plannedUnderPolicy(job: FiredReminder): boolean;
  /** After a reminder job ran, in the shard it came from: the schedule moves on when its phase is used up. */
  advance(job: FiredReminder, now: Date): Promise<void>;
  /** Makes Redis match Postgres for every open and overdue invoice, shard by shard. */
  reconcile(): Promise<ReconcileReport>;
}

/** Job states that mean a shard still holds work for its workers. */
const PENDING_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;

/**
 * `store` gives the reconciler its bulk reads of a shard's queue (one read each, on either
 * backend, one slot on a Redis Cluster) and the policy marker.
 */
export function createReminderService(
  db: Queryable,
  shards: ReminderShardSet,
  store: Pick<QueueBackend, 'schedulerIds' | 'existingJobIds' | 'readMarker' | 'writeMarker' | 'removeSchedulers'>,
  policy: ReminderPolicy,
): ReminderService {
  const byShard = new Map<number, ReminderSchedulers>();
  const schedulersOf = (shard: number): ReminderSchedulers => {
    let s = byShard.get(shard);
    if (!s) {
      s = createReminderSchedulers(shards.queues.shard(shard), policy, JOBS['invoice.reminder'].options);
      byShard.set(shard, s);
    }
    return s;
  };
  const ownShard = (invoiceId: string) => reminderShardOf(invoiceId, shards.layout().own);
  const own = (invoiceId: string) => schedulersOf(ownShard(invoiceId));
  /** Removes the invoice's scheduler from every shard it may be in but `keep`. */
  const cancelElsewhere = (invoiceId: string, keep: number | null) =>
    Promise.all(placementsOf(invoiceId, shards.layout()).filter((s) => s !== keep).map((s) => schedulersOf(s).cancel(invoiceId)));
  // An upper bound of the last post-due slot after the due date: a month counts 30 days in
  // Duration.toMillis, so allow 10% and two days (local hour, DST) on top.
  const planHorizonMs =
    (policy.afterStart.toMillis() + policy.afterEvery.toMillis() * Math.max(0, policy.afterMax - 1)) * 1.1 + 2 * 86_400_000;
  const target = (t: ReminderTarget) => ({ id: t.id, dueAt: t.due_at!, timeZone: t.time_zone });
  const runs = remindersRunFor;

  async function addDueJob(t: ReminderTarget): Promise<void> {
    const job = dueJob(t.id, t.due_at!);
    await shards.queues.shard(ownShard(t.id)).add(job.name, job.data, job.opts);
  }

  // The policy the schedules in the queue store were last brought in line with, kept beside them
  // in shard 0 (lost with them). A scheduler stores the policy it was planned with (its pattern),
  // so after a restart with other REMINDERS_* values it would keep firing the old plan while the
  // timeline shows the new one: the reconcile that first sees a new policy re-plans every open
  // invoice's schedule, then records it.
  const policyKey = 'reminder-policy';
  const policyId = JSON.stringify(describePolicy(policy));

  return {
    shards,
    schedulersOf,
    queueOf: (invoiceId) => shards.queues.shard(ownShard(invoiceId)),
    async afterSend(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (!t || t.due_at === null) return;
      if (t.status === 'open') await addDueJob(t);
      if (runs(t)) {
        // A re-run of the send job must not re-plan a schedule that already advanced.
        const placed = await Promise.all(placementsOf(t.id, shards.layout()).map((s) => schedulersOf(s).exists(t.id)));
        if (!placed.some(Boolean)) await own(t.id).schedule(target(t), new Date());
      }
    },
    async atDueDate(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (!t || !runs(t)) return;
      await own(t.id).switchToAfter(target(t), new Date());
      await cancelElsewhere(t.id, ownShard(t.id));
      // Paid (or reminders off) between the read above and the upsert: the stop notification may
      // have removed the old scheduler before the upsert made a new one. Read again; a change
      // committed after this read notifies the workers after the upsert, so it cannot be missed.
      const again = await findReminderTarget(db, invoiceId);
      if (!again || !runs(again)) await cancelElsewhere(invoiceId, null);
    },
    async stop(invoiceId) {
      await cancelElsewhere(invoiceId, null);
    },
    async stopMany(invoiceIds) {
      const layout = shards.layout();
      const byShard = new Map<number, string[]>();
      for (const id of invoiceIds) {
        const schedulerId = reminderSchedulerId(id);
        for (const s of placementsOf(id, layout)) {
          const list = byShard.get(s);
          if (list) list.push(schedulerId);
          else byShard.set(s, [schedulerId]);
        }
      }
      await Promise.all([...byShard].map(([s, ids]) => store.removeSchedulers(shards.queues.shard(s), ids)));
    },
    async resume(invoiceId) {
      const t = await findReminderTarget(db, invoiceId);
      if (!t || !runs(t)) return;
      await own(t.id).schedule(target(t), new Date());
      await cancelElsewhere(t.id, ownShard(t.id));
    },
    plannedUnderPolicy: (job) => schedulersOf(0).plannedUnderPolicy(job),
    async advance(job, now) {
      const shard = shardOfQueueName(job.queueName);
      if (shard !== null) await schedulersOf(shard).advance(job, now);
    },
    async reconcile() {
      const layout = await shards.refresh().catch(() => shards.layout());
      // Scheduler ids live in each shard queue's `repeat` sorted set; one read per shard. Redis is
      // read BEFORE Postgres: an invoice paid (and its scheduler removed) between the two reads is
      // then seen paid and left alone; read the other way round it would look qualifying and
      // missing, and be put back on a schedule. Likewise a schedule created between the reads is
      // at worst upserted again, never removed.
      const present = new Map<string, number[]>();
      for (let shard = 0; shard < layout.consumed; shard++) {
        for (const id of await store.schedulerIds(shards.queues.shard(shard))) {
          const invoiceId = invoiceIdOfReminderScheduler(id);
          if (invoiceId !== null) present.set(invoiceId, [...(present.get(invoiceId) ?? []), shard]);
        }
      }
      const policyChanged = (await store.readMarker(shards.queues.shard(0), policyKey)) !== policyId;
      const targets = await listReminderTargets(db);
      const replan: { t: ReminderTarget; shard: number }[] = [];
      const report: ReconcileReport = {
        qualifying: 0,
        schedulersCreated: 0,
        schedulersResharded: 0,
        schedulersMoved: 0,
        schedulersRemoved: 0,
        schedulersForeign: 0,
        dueJobsCreated: 0,
        membersForgotten: 0,
      };
      const wanted = new Set<string>();
      const now = Date.now();
      for (const t of targets) {
        if (!runs(t)) continue;
        report.qualifying++;
        wanted.add(t.id);
        const where = present.get(t.id) ?? [];
        const kept = where.filter((s) => inPlace(t.id, s, layout));
        if (kept.length > 0) {
          // In place under a live count; a copy elsewhere is left over from a move: remove it.
          for (const s of where) if (!kept.includes(s)) await schedulersOf(s).cancel(t.id);
          if (policyChanged) replan.push({ t, shard: kept[0] });
          continue;
        }
        // Lost from Redis, or in a shard no live count uses: plan again in this process's shard
        // from just after the last recorded reminder, so a slot missed meanwhile still goes out
        // (once: deliveries dedup by slot), but never one that passed while reminders were off
        // (the send refuses those: the catch-up would be lost); then remove the old one.
        const after = Math.max((t.last_slot_at ?? t.sent_at ?? new Date(now)).getTime(), t.reminders_resumed_at?.getTime() ?? -Infinity);
        const from = new Date(Math.min(now, after + 1));
        // Most invoices without a scheduler simply used up their plan: skip them without the
        // calendar arithmetic or a Redis call (this loop runs over every overdue invoice).
        if (where.length === 0 && t.due_at!.getTime() + planHorizonMs < from.getTime()) continue;
        const planned = await own(t.id).schedule(target(t), from);
        for (const s of where) if (s !== ownShard(t.id)) await schedulersOf(s).cancel(t.id);
        if (planned && where.length > 0) report.schedulersResharded++;
        else if (planned) report.schedulersCreated++;
      }
      // Only schedulers of this database's own invoices are removed: one of an invoice this
      // database does not have belongs to another deployment sharing the prefix (see
      // prefix-claim.ts), and removing it would silently stop that deployment's reminders.
      const unwanted = [...present.keys()].filter((id) => !wanted.has(id));
      const ours = await existingInvoiceIds(db, unwanted);
      for (const invoiceId of unwanted) {
        if (!ours.has(invoiceId)) {
          report.schedulersForeign++;
          continue;
        }
        for (const s of present.get(invoiceId) ?? []) await schedulersOf(s).cancel(invoiceId);
        report.schedulersRemoved++;
      }
      if (policyChanged) {
        for (let i = 0; i < replan.length; i += 200) {
          const batch = replan.slice(i, i + 200);
          const current = await Promise.all(batch.map(({ t, shard }) => shards.queues.shard(shard).getJobScheduler(reminderSchedulerId(t.id))));
          for (const [j, { t, shard }] of batch.entries()) {
            const found = current[j];
            if (!found || schedulersOf(shard).followsPolicy(found.pattern, t.due_at!)) continue;
            // From now on, under the new policy: slots already sent stay sent (and a slot is
            // deduplicated in deliveries anyway), missed slots of the new plan are not caught
            // up, so no burst; the next email is the new plan's first slot from now.
            await schedulersOf(shard).schedule(target(t), new Date());
            report.schedulersMoved++;
          }
        }
        // Only once every schedule follows it: a failure above leaves the next reconcile to finish.
        await store.writeMarker(shards.queues.shard(0), policyKey, policyId);
      }
      // Due-date jobs: one existence check per shard (a pipeline over one queue's keys stays in
      // one slot), in every shard the job may be in.
      const open = targets.filter((t) => t.status === 'open');
      const found = new Set<string>();
      const byShard = new Map<number, ReminderTarget[]>();
      for (const t of open) for (const s of placementsOf(t.id, layout)) byShard.set(s, [...(byShard.get(s) ?? []), t]);
      for (const [shard, list] of byShard) {
        const exists = await store.existingJobIds(shards.queues.shard(shard), list.map((t) => dueJobId(t.id, t.due_at!)));
        for (const t of list) if (exists.has(dueJobId(t.id, t.due_at!))) found.add(t.id);
      }
      for (const t of open) {
        if (found.has(t.id)) continue;
        await addDueJob(t);
        report.dueJobsCreated++;
      }
      // Stale members whose extra shards hold nothing any more are forgotten; workers then stop
      // reading those shards.
      const holdsWork = new Set<number>();
      for (const where of present.values()) for (const s of where) holdsWork.add(s);
      for (let shard = Math.max(...layout.live); shard < layout.consumed; shard++) {
        const counts = await shards.queues.shard(shard).getJobCounts(...PENDING_STATES);
        if (Object.values(counts).some((n) => n > 0)) holdsWork.add(shard);
      }
      const forget = forgettable(shards.members(), layout, (s) => holdsWork.has(s));
      if (forget.length > 0) report.membersForgotten = await shards.forget(forget);
      return report;
    },
  };
}
