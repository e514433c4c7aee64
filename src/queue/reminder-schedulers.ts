// Invoice reminders on BullMQ job schedulers. Each invoice has at most one scheduler, id
// `rem-<invoiceId>`, whose repeat pattern is not cron but a self-describing spec of the
// current phase (due instant, start, step, local hour, cap; zone in `tz`). The custom
// repeatStrategy below turns that spec into the next planned slot with the same pure functions
// the domain uses, so fired instants are exactly planReminderSlots' instants, DST-correct in
// the zone, with no drift.
//
// Why not `every`: it is a fixed millisecond step (P1D = 86 400 000 ms slides an hour at a DST
// change) and re-upserting with an unchanged `every` keeps the old slot even when startDate moved
// (addJobScheduler-11.lua reuses prevMillis). Why one id for both phases: the before→after switch
// is one atomic upsert (addJobScheduler-11.lua swaps the pending job and the template in one
// script), cancel is one script call, and "one live scheduler per invoice" holds by construction.
//
// Hazards every caller must respect:
// - The Queue that upserts AND every Worker on this queue must be built with
//   `settings: reminderSchedulerSettings`; BullMQ computes the first slot in the upserting
//   process and each following slot in the worker that picks up the current job (job-scheduler.js,
//   worker.js nextJobFromJobData). A worker with the default strategy hands the spec to
//   cron-parser, which throws: it emits 'error', leaves the job in active unprocessed (until
//   stall recovery) and the chain stops. Cron schedulers on the same queue keep working:
//   patterns that are not ours go to BullMQ's defaultRepeatStrategy.
// - The spec (including the policy durations) is stored with the scheduler: a config change
//   applies to an invoice at its next schedule()/switchToAfter(), never to a chain in flight, so
//   the first and later slots can never be computed under two different policies.
// - A job already promoted to wait/active when cancel() runs is still delivered
//   (removeJobScheduler-3.lua only deletes the delayed one): the handler must re-check the invoice.
// - BullMQ never deletes an exhausted scheduler (no next slot → no Lua call, the hash and its
//   `repeat` zset entry stay). advance(), called by the handler after each reminder, removes it
//   once the after phase is used up, and when the before phase is used up moves on to the after
//   phase, so overdue reminders do not depend on the due-date trigger alone (switchToAfter is
//   idempotent: calling both is fine).
// - schedule(inv, now) with `now` in the past (catch-up) fires the first missed slot at once,
//   whatever its phase, then continues strictly after the real time: one catch-up, no burst.
// - Redis memory: ~1.7 KB per scheduled invoice with `inv_`+24-char ids (scheduler hash ~360 B
//   as a listpack, pending job hash ~1 KB, one entry in each of the `repeat` and `delayed`
//   zsets). A hash value over 64 bytes (hash-max-listpack-value) turns the scheduler hash into a
//   hashtable at ~700 B: the template data {"invoiceId","phase"} and the spec stay under that
//   only while invoice ids stay short (a 36-char UUID pushes the total to ~2.1 KB).
// - Fire lateness comes from Redis, not from this module: the worker waits for the next delayed
//   job with a BZPOPMIN timeout, which Redis only expires on its `hz` tick (10/s by default), so
//   a reminder starts 0–100 ms after its planned instant (measured p50 ~20 ms, p99 ~60–95 ms).
import { defaultRepeatStrategy, type AdvancedRepeatOptions, type JobSchedulerJobOptions, type JobSchedulerTemplateOptions, type RepeatOptions, type RepeatStrategy, type WorkerOptions } from 'bullmq';
import { Duration } from 'luxon';
import {
  firstSlotFrom,
  nextSlot,
  phaseRule,
  type PhaseRule,
  type ReminderPhase,
  type ReminderPolicy,
  type ReminderSlot,
} from '../domain/reminder-schedule.js';
import type { AppQueue } from './backend.js';
import { SCHEDULERS, type JobName, type ReminderJobData } from './catalogue.js';


const REMINDER_JOB = 'invoice.reminder' satisfies JobName;

export interface ReminderInvoice {
  id: string;
  dueAt: Date;
  timeZone: string;
}

// `rem1 <phase> <due ms> <start> <every> <localHour> [<max>]`, e.g. `rem1 after 1795303392865 P1D P7D 9 4`.
// Terse on purpose: it is stored twice per invoice (scheduler hash and pending job's opts).
const SPEC_RE = /^rem1 (before|after) (\d+) (P\S+) (P\S+) (\d{1,2})(?: (\d+))?$/;

interface PhaseSpec {
  rule: PhaseRule;
  dueAt: Date;
}

function encodeSpec(rule: PhaseRule, dueAt: Date): string {
  const max = rule.max === null ? '' : ` ${rule.max}`;
  return `rem1 ${rule.phase} ${dueAt.getTime()} ${rule.start.toISO()} ${rule.every.toISO()} ${rule.localHour}${max}`;
}

function decodeSpec(pattern: string | undefined): PhaseSpec | null {
  const m = pattern === undefined ? null : SPEC_RE.exec(pattern);
  if (m === null) return null;
  const phase = m[1] as ReminderPhase;
  const rule: PhaseRule = {
    phase,
    start: Duration.fromISO(m[3]),
    every: Duration.fromISO(m[4]),
    max: m[6] === undefined ? null : Number(m[6]),
    localHour: Number(m[5]),
  };
  return { rule, dueAt: new Date(Number(m[2])) };
}

/**
 * Next planned slot for our specs, BullMQ's cron strategy for anything else. On the upsert call
 * (no iteration count yet) the window opens at startDate inclusive, so a slot at the caller's `now`
 * is kept; on a worker call `millis` is max(Date.now(), the slot just picked up) and the next slot
 * must be strictly later, otherwise BullMQ would see a duplicate job id and end the chain
 * (updateJobScheduler-12.lua).
 */
export const reminderRepeatStrategy: RepeatStrategy = (millis: number, opts: RepeatOptions) => {
  const spec = decodeSpec(opts.pattern);
  if (spec === null) return defaultRepeatStrategy(millis, opts);
  const firstCall = opts.count === undefined;
  const from = firstCall && opts.startDate !== undefined ? new Date(opts.startDate) : new Date(millis);
  return nextSlot(spec.rule, spec.dueAt, opts.tz ?? 'UTC', from, firstCall)?.at.getTime();
};

/** Pass as `settings` to the Queue that schedules reminders and to every Worker of that queue. */
export const reminderSchedulerSettings: AdvancedRepeatOptions = Object.freeze({ repeatStrategy: reminderRepeatStrategy });

/**
 * Spread into the reminder Worker's options. Completed reminders are removed (the handler dedups
 * by invoice and planned slot, and a kept job is ~1.1 KB of Redis per reminder sent); failures
 * are kept, bounded, for inspection. Set here rather than in the job template, which Redis would
 * store once per scheduled invoice.
 */
export const reminderWorkerOptions: Pick<WorkerOptions, 'settings' | 'removeOnComplete' | 'removeOnFail'> = Object.freeze({
  settings: reminderSchedulerSettings,
  removeOnComplete: { count: 0 },
  removeOnFail: { count: 1000 },
});

export function reminderSchedulerId(invoiceId: string): string {
  // BullMQ keys are `<prefix>:<queue>:repeat:<id>` and job ids `repeat:<id>:<millis>`; a ':' in
  // the id makes both ambiguous (and 4+ colons look like a legacy repeat key to the worker).
  if (invoiceId === '' || invoiceId.includes(':')) throw new RangeError(`invoice id unusable in a scheduler id: "${invoiceId}"`);
  return `${SCHEDULERS.reminderPrefix}${invoiceId}`;
}

/** The invoice of a reminder scheduler id; null for any other scheduler. */
export function invoiceIdOfReminderScheduler(schedulerId: string): string | null {
  return schedulerId.startsWith(SCHEDULERS.reminderPrefix) ? schedulerId.slice(SCHEDULERS.reminderPrefix.length) : null;
}

const JOB_ID_RE = /^repeat:(.+):(\d+)$/;

/**
 * A fired reminder job as its handler sees it: its id, queue, payload and options (where a
 * scheduler-made job carries its repeat options). A BullMQ Job is one.
 */
export interface FiredReminder {
  id?: string;
  queueName: string;
  data: ReminderJobData;
  opts: object;
}

/** Scheduler-produced jobs carry their repeat options in opts (typed internal in BullMQ 6). */
function repeatOf(job: Pick<FiredReminder, 'opts'>): JobSchedulerJobOptions['repeat'] {
  return (job.opts as JobSchedulerJobOptions).repeat;
}

/**
 * The planned slot of a fired reminder job, for dedup by (invoice, slot). Later iterations carry
 * it in their id (`repeat:<schedulerId>:<millis>`, = timestamp + delay). The first job of an
 * upsert may not: when its slot is already past (a `now` in the past, or a few ms of lag) BullMQ
 * clamps the instant to the upsert time (job-scheduler.js). So for iteration 1 the slot is
 * recomputed the way the strategy chose it, from the startDate stored in the job's repeat opts.
 */
export function plannedInstantOf(job: Pick<FiredReminder, 'id' | 'opts'>): Date {
  const m = JOB_ID_RE.exec(job.id ?? '');
  if (m === null) throw new Error(`not a scheduler-produced job: ${job.id}`);
  const repeat = repeatOf(job);
  const spec = decodeSpec(repeat?.pattern);
  if (spec !== null && repeat?.count === 1 && repeat.startDate !== undefined) {
    const first = nextSlot(spec.rule, spec.dueAt, repeat.tz ?? 'UTC', new Date(repeat.startDate), true);
    if (first !== null) return first.at;
  }
  return new Date(Number(m[2]));
}

export interface ReminderSchedulers {
  /** Puts the invoice on the phase of its first slot at or after `now`; removes it when none is left. */
  schedule(inv: ReminderInvoice, now: Date): Promise<ReminderSlot | null>;
  /** At the due date: replaces the invoice's scheduler with the after phase (one atomic upsert). */
  switchToAfter(inv: ReminderInvoice, now: Date): Promise<ReminderSlot | null>;
  /** Removes the invoice's scheduler and its pending delayed job in one script call. */
  cancel(invoiceId: string): Promise<void>;
  /** The invoice has a scheduler in this queue. */
  exists(invoiceId: string): Promise<boolean>;
  /** Call after handling a reminder: moves on when its phase is used up (see file header). */
  advance(job: FiredReminder, now: Date): Promise<void>;
  plannedInstantOf(job: Pick<FiredReminder, 'id' | 'opts'>): Date;
  /** Whether a scheduler's pattern is this policy's plan for its phase (false for foreign patterns). */
  followsPolicy(pattern: string | undefined, dueAt: Date): boolean;
  /** Whether a fired reminder job was planned under this policy (true for jobs not ours). */
  plannedUnderPolicy(job: Pick<FiredReminder, 'opts'>): boolean;
}

export function createReminderSchedulers(
  queue: AppQueue,
  policy: ReminderPolicy,
  // Template opts are copied into the scheduler hash and every pending job (~160 B per invoice
  // for removeOnComplete/removeOnFail); keep-policies belong on the Worker (reminderWorkerOptions).
  jobOpts: JobSchedulerTemplateOptions = {},
): ReminderSchedulers {
  if (queue.opts.settings?.repeatStrategy !== reminderRepeatStrategy) {
    throw new Error(`queue "${queue.name}" must be created with settings: reminderSchedulerSettings`);
  }

  async function upsert(inv: ReminderInvoice, slot: ReminderSlot, now: Date): Promise<ReminderSlot> {
    const data: ReminderJobData = { invoiceId: inv.id, phase: slot.phase };
    await queue.upsertJobScheduler(
      reminderSchedulerId(inv.id),
      { pattern: encodeSpec(phaseRule(policy, slot.phase), inv.dueAt), tz: inv.timeZone, startDate: now },
      { name: REMINDER_JOB, data, opts: jobOpts },
    );
    return slot;
  }

  async function cancel(invoiceId: string): Promise<void> {
    await queue.removeJobScheduler(reminderSchedulerId(invoiceId));
  }

  async function exists(invoiceId: string): Promise<boolean> {
    return (await queue.getJobScheduler(reminderSchedulerId(invoiceId))) !== undefined;
  }

  // Upserting a phase with no slot left would be a no-op in BullMQ (the strategy returns
  // undefined and no script runs), leaving the previous phase's scheduler in place: cancel instead.
  async function schedule(inv: ReminderInvoice, now: Date): Promise<ReminderSlot | null> {
    const first = firstSlotFrom(policy, inv.dueAt, inv.timeZone, now);
    if (first === null) {
      await cancel(inv.id);
      return null;
    }
    return upsert(inv, first, now);
  }

  async function switchToAfter(inv: ReminderInvoice, now: Date): Promise<ReminderSlot | null> {
    const next = nextSlot(phaseRule(policy, 'after'), inv.dueAt, inv.timeZone, now, true);
    if (next === null) {
      await cancel(inv.id);
      return null;
    }
    return upsert(inv, { phase: 'after', at: next.at }, now);
  }

  // The worker made the next job (if any) when it picked this one up; if the phase still has a
  // slot after `now`, that job exists and there is nothing to do, without a round trip. Otherwise
  // the chain may be exhausted, which only Redis knows for sure (a catch-up job from a past `now`
  // can end its phase early): the scheduler still pointing at this very job means no next job.
  async function advance(job: FiredReminder, now: Date): Promise<void> {
    const repeat = repeatOf(job);
    const pattern = repeat?.pattern;
    const spec = decodeSpec(pattern);
    const m = JOB_ID_RE.exec(job.id ?? '');
    if (spec === null || m === null) return;
    const tz = repeat?.tz ?? 'UTC';
    if (nextSlot(spec.rule, spec.dueAt, tz, now, false) !== null) return;
    const id = reminderSchedulerId(job.data.invoiceId);
    const current = await queue.getJobScheduler(id);
    // A schedule() or cancel() since this job was made owns the scheduler now: leave it alone.
    // Check-then-act, not atomic; the window is one round trip.
    if (current === undefined || current.pattern !== pattern || current.next !== Number(m[2])) return;
    if (spec.rule.phase === 'before') {
      await switchToAfter({ id: job.data.invoiceId, dueAt: spec.dueAt, timeZone: tz }, now);
    } else {
      await queue.removeJobScheduler(id);
    }
  }

  function followsPolicy(pattern: string | undefined, dueAt: Date): boolean {
    const spec = decodeSpec(pattern);
    return spec !== null && pattern === encodeSpec(phaseRule(policy, spec.rule.phase), dueAt);
  }

  function plannedUnderPolicy(job: Pick<FiredReminder, 'opts'>): boolean {
    const pattern = repeatOf(job)?.pattern;
    const spec = decodeSpec(pattern);
    return spec === null || followsPolicy(pattern, spec.dueAt);
  }

  return { schedule, switchToAfter, cancel, exists, advance, plannedInstantOf, followsPolicy, plannedUnderPolicy };
}
