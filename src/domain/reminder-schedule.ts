// When an invoice's payment reminders go out: pure calendar arithmetic over the reminder policy,
// no I/O. The queue adapter (src/queue/reminder-schedulers.ts) asks nextSlot() for one slot at a
// time, so a long series is never materialised there; planReminderSlots() lists all of them.
//
// A phase whose start and step are both day-sized (days/weeks/months/years, no time part) is a
// calendar phase: each slot is computed in the invoice's zone and lands at localHour:00 there, so
// it stays at 09:00 local across DST changes (a fixed 86 400 000 ms step would drift an hour).
// Any other phase (PT2S, PT30M, P1DT2H) is exact: due ± offset, time of day untouched.
import { DateTime, Duration } from 'luxon';
import { LATEST_INSTANT_MS } from './invoice-limits.js';
import type { ReminderKind } from './delivery-kinds.js';

export interface ReminderPolicy {
  beforeStart: Duration;
  beforeEvery: Duration;
  afterStart: Duration;
  afterEvery: Duration;
  afterMax: number;
  localHour: number;
}

/** The policy as configured (ISO durations), for the worker's start log and the policy check. */
export function describePolicy(policy: ReminderPolicy): Record<string, string | number> {
  return {
    before_start: policy.beforeStart.toISO() ?? '',
    before_every: policy.beforeEvery.toISO() ?? '',
    after_start: policy.afterStart.toISO() ?? '',
    after_every: policy.afterEvery.toISO() ?? '',
    after_max: policy.afterMax,
    local_hour: policy.localHour,
  };
}

export type ReminderPhase = 'before' | 'after';

/** The deliveries-table kind (and email template) of a reminder of this phase. */
export function reminderKindOf(phase: ReminderPhase): ReminderKind {
  return `reminder_${phase}`;
}

export interface ReminderSlot {
  phase: ReminderPhase;
  at: Date;
}

/** One phase of the policy: slot k is due ∓ start + k × every (snapped to localHour when calendar). */
export interface PhaseRule {
  phase: ReminderPhase;
  start: Duration;
  every: Duration;
  /** Upper bound on the slot count; null for the before phase, which ends at the due date. */
  max: number | null;
  localHour: number;
}

export function phaseRule(policy: ReminderPolicy, phase: ReminderPhase): PhaseRule {
  return phase === 'before'
    ? { phase, start: policy.beforeStart, every: policy.beforeEvery, max: null, localHour: policy.localHour }
    : { phase, start: policy.afterStart, every: policy.afterEvery, max: policy.afterMax, localHour: policy.localHour };
}

/** No hours/minutes/seconds/milliseconds part, i.e. whole days, weeks, months or years. */
export function isDaySized(d: Duration): boolean {
  return d.hours === 0 && d.minutes === 0 && d.seconds === 0 && d.milliseconds === 0;
}

function isCalendar(rule: PhaseRule): boolean {
  return isDaySized(rule.start) && isDaySized(rule.every);
}

function assertRule(rule: PhaseRule): void {
  // A zero or negative step would loop forever (before phase) or stack every slot on one instant.
  if (!rule.every.isValid || rule.every.toMillis() <= 0) throw new RangeError(`reminder step must be positive: ${rule.every.toISO()}`);
  if (!rule.start.isValid || rule.start.toMillis() < 0) throw new RangeError(`reminder start must not be negative: ${rule.start.toISO()}`);
  if (!Number.isInteger(rule.localHour) || rule.localHour < 0 || rule.localHour > 23) throw new RangeError(`localHour must be 0..23: ${rule.localHour}`);
}

function anchorOf(dueAt: Date, timeZone: string): DateTime {
  const due = DateTime.fromJSDate(dueAt, { zone: timeZone });
  if (!due.isValid) throw new RangeError(`cannot place ${dueAt.toISOString()} in time zone "${timeZone}": ${due.invalidExplanation ?? due.invalidReason}`);
  return due;
}

/**
 * Slot k before snapping to localHour, whether or not it exists. The offset ∓start + k × every is
 * added to the due date as one duration rather than step by step, so month steps do not drift
 * (Jan 31 + 2 × P1M is Mar 31; chained it would be Feb 28 then Mar 28).
 */
function rawAt(rule: PhaseRule, due: DateTime, k: number): DateTime {
  const start = rule.phase === 'before' ? rule.start.negate() : rule.start;
  return due.plus(rule.every.mapUnits((x) => x * k).plus(start));
}

function slotAt(rule: PhaseRule, due: DateTime, k: number): number {
  const raw = rawAt(rule, due, k);
  // A localHour inside a spring-forward gap is moved forward by luxon (02:00 → 03:00).
  return isCalendar(rule) ? raw.set({ hour: rule.localHour, minute: 0, second: 0, millisecond: 0 }).toMillis() : raw.toMillis();
}

/**
 * How many slots the phase has. The before phase keeps slot k while due - start + k × every is
 * strictly before due, judged before snapping: the count then depends on the policy alone (P3D/P1D
 * gives 3 whatever the due time of day), and a snapped calendar slot lands on an earlier local day
 * than the due date, so it is before due too.
 */
function slotCount(rule: PhaseRule, due: DateTime): number {
  if (rule.max !== null) return Math.max(0, rule.max);
  const dueMs = due.toMillis();
  const estimate = Math.ceil(rule.start.toMillis() / rule.every.toMillis());
  let k = Number.isFinite(estimate) ? Math.max(0, estimate) : 0;
  while (k > 0 && rawAt(rule, due, k - 1).toMillis() >= dueMs) k--;
  while (rawAt(rule, due, k).toMillis() < dueMs) k++;
  return k;
}

/**
 * The smallest k whose slot is at or after `t` (inclusive) or strictly after it, existing or not.
 * Slots increase strictly with k; the estimate is only a starting point because calendar steps vary
 * in length (DST days, month lengths), so the walk makes it exact.
 */
function firstIndexReaching(rule: PhaseRule, due: DateTime, t: number, inclusive: boolean): number {
  const reached = (k: number) => (inclusive ? slotAt(rule, due, k) >= t : slotAt(rule, due, k) > t);
  const estimate = Math.floor((t - slotAt(rule, due, 0)) / rule.every.toMillis());
  let k = Number.isFinite(estimate) ? Math.max(0, estimate) : 0;
  while (k > 0 && reached(k - 1)) k--;
  while (!reached(k)) k++;
  return k;
}

/** Index of the phase's last slot, or null when the phase is empty. */
function lastIndex(rule: PhaseRule, dueAt: Date, timeZone: string): number | null {
  assertRule(rule);
  const due = anchorOf(dueAt, timeZone);
  const count = slotCount(rule, due);
  return count > 0 ? count - 1 : null;
}

/** The first slot of the phase at or after `t` (inclusive) or strictly after it; null when none. */
export function nextSlot(
  rule: PhaseRule,
  dueAt: Date,
  timeZone: string,
  t: Date,
  inclusive: boolean,
): { k: number; at: Date } | null {
  assertRule(rule);
  const due = anchorOf(dueAt, timeZone);
  const k = firstIndexReaching(rule, due, t.getTime(), inclusive);
  return k < slotCount(rule, due) ? { k, at: new Date(slotAt(rule, due, k)) } : null;
}

function phaseSlots(rule: PhaseRule, dueAt: Date, timeZone: string): ReminderSlot[] {
  const last = lastIndex(rule, dueAt, timeZone);
  if (last === null) return [];
  const due = anchorOf(dueAt, timeZone);
  const slots: ReminderSlot[] = [];
  for (let k = 0; k <= last; k++) slots.push({ phase: rule.phase, at: new Date(slotAt(rule, due, k)) });
  return slots;
}

/** Every reminder of the invoice, oldest first: the before phase, then the after phase. */
export function planReminderSlots(policy: ReminderPolicy, dueAt: Date, timeZone: string): ReminderSlot[] {
  return [
    ...phaseSlots(phaseRule(policy, 'before'), dueAt, timeZone),
    ...phaseSlots(phaseRule(policy, 'after'), dueAt, timeZone),
    // A slot past year 9999 could not be written in RFC 3339: there is none.
  ].filter((s) => s.at.getTime() <= LATEST_INSTANT_MS);
}

/** The slots at or after `now`; missed ones are dropped, so re-enabling reminders sends no burst. */
export function futureReminderSlots(policy: ReminderPolicy, dueAt: Date, timeZone: string, now: Date): ReminderSlot[] {
  return planReminderSlots(policy, dueAt, timeZone).filter((s) => s.at.getTime() >= now.getTime());
}

/** The first slot at or after `now` across both phases, or null when the plan is used up. */
export function firstSlotFrom(policy: ReminderPolicy, dueAt: Date, timeZone: string, now: Date): ReminderSlot | null {
  for (const phase of ['before', 'after'] as const) {
    const next = nextSlot(phaseRule(policy, phase), dueAt, timeZone, now, true);
    if (next !== null && next.at.getTime() <= LATEST_INSTANT_MS) return { phase, at: next.at };
  }
  return null;
}
