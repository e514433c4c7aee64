import { DateTime, Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import {
  firstSlotFrom,
  futureReminderSlots,
  isDaySized,
  nextSlot,
  phaseRule,
  planReminderSlots,
  type ReminderPolicy,
  type ReminderSlot,
} from '../../src/domain/reminder-schedule.js';

const d = (iso: string) => Duration.fromISO(iso);

const DEFAULTS: ReminderPolicy = {
  beforeStart: d('P3D'),
  beforeEvery: d('P1D'),
  afterStart: d('P1D'),
  afterEvery: d('P7D'),
  afterMax: 4,
  localHour: 9,
};

const iso = (slots: ReminderSlot[]) => slots.map((s) => `${s.phase} ${s.at.toISOString()}`);
const localTimes = (slots: ReminderSlot[], zone: string) =>
  slots.map((s) => DateTime.fromJSDate(s.at, { zone }).toFormat('yyyy-MM-dd HH:mm:ss.SSS ZZ'));

describe('planReminderSlots with the default policy', () => {
  it('lists 3 days before to 1 day before, then 1, 8, 15, 22 days after, at 09:00', () => {
    expect(iso(planReminderSlots(DEFAULTS, new Date('2026-06-15T17:00:00Z'), 'UTC'))).toEqual([
      'before 2026-06-12T09:00:00.000Z',
      'before 2026-06-13T09:00:00.000Z',
      'before 2026-06-14T09:00:00.000Z',
      'after 2026-06-16T09:00:00.000Z',
      'after 2026-06-23T09:00:00.000Z',
      'after 2026-06-30T09:00:00.000Z',
      'after 2026-07-07T09:00:00.000Z',
    ]);
  });

  it('counts days on the local calendar of the zone, not the UTC one', () => {
    // 20:00Z on the 15th is 05:00 on the 16th in Tokyo (UTC+9, no DST).
    expect(iso(planReminderSlots(DEFAULTS, new Date('2026-06-15T20:00:00Z'), 'Asia/Tokyo'))).toEqual([
      'before 2026-06-13T00:00:00.000Z',
      'before 2026-06-14T00:00:00.000Z',
      'before 2026-06-15T00:00:00.000Z',
      'after 2026-06-17T00:00:00.000Z',
      'after 2026-06-24T00:00:00.000Z',
      'after 2026-07-01T00:00:00.000Z',
      'after 2026-07-08T00:00:00.000Z',
    ]);
  });

  it('keeps the before count at 3 whatever the due time of day (nothing on the due day)', () => {
    const late = planReminderSlots(DEFAULTS, new Date('2026-06-15T23:59:00Z'), 'UTC');
    const early = planReminderSlots(DEFAULTS, new Date('2026-06-15T00:00:00Z'), 'UTC');
    expect(late.filter((s) => s.phase === 'before').map((s) => s.at.toISOString())).toEqual([
      '2026-06-12T09:00:00.000Z',
      '2026-06-13T09:00:00.000Z',
      '2026-06-14T09:00:00.000Z',
    ]);
    expect(early.filter((s) => s.phase === 'before').map((s) => s.at.toISOString())).toEqual([
      '2026-06-12T09:00:00.000Z',
      '2026-06-13T09:00:00.000Z',
      '2026-06-14T09:00:00.000Z',
    ]);
  });

  it('is sorted, before slots strictly before due and after slots strictly after', () => {
    const due = new Date('2026-02-10T11:11:11.111Z');
    const slots = planReminderSlots(DEFAULTS, due, 'Australia/Sydney');
    const ms = slots.map((s) => s.at.getTime());
    expect([...ms].sort((a, b) => a - b)).toEqual(ms);
    for (const s of slots) {
      if (s.phase === 'before') expect(s.at.getTime()).toBeLessThan(due.getTime());
      else expect(s.at.getTime()).toBeGreaterThan(due.getTime());
    }
  });
});

describe('DST changes', () => {
  it('Europe/Paris spring forward (2026-03-29): every slot stays at 09:00 local', () => {
    const slots = planReminderSlots(DEFAULTS, new Date('2026-03-31T15:00:00Z'), 'Europe/Paris');
    expect(iso(slots)).toEqual([
      'before 2026-03-28T08:00:00.000Z', // CET, UTC+1
      'before 2026-03-29T07:00:00.000Z', // the change day itself, CEST, UTC+2
      'before 2026-03-30T07:00:00.000Z',
      'after 2026-04-01T07:00:00.000Z',
      'after 2026-04-08T07:00:00.000Z',
      'after 2026-04-15T07:00:00.000Z',
      'after 2026-04-22T07:00:00.000Z',
    ]);
    // Consecutive before slots are 23 h apart across the change, not 24 h.
    expect(slots[1].at.getTime() - slots[0].at.getTime()).toBe(23 * 3600_000);
    for (const t of localTimes(slots, 'Europe/Paris')) expect(t).toMatch(/ 09:00:00\.000 /);
  });

  it('America/New_York fall back (2026-11-01): every slot stays at 09:00 local', () => {
    const slots = planReminderSlots(DEFAULTS, new Date('2026-10-30T15:00:00Z'), 'America/New_York');
    expect(iso(slots)).toEqual([
      'before 2026-10-27T13:00:00.000Z', // EDT, UTC-4
      'before 2026-10-28T13:00:00.000Z',
      'before 2026-10-29T13:00:00.000Z',
      'after 2026-10-31T13:00:00.000Z',
      'after 2026-11-07T14:00:00.000Z', // EST, UTC-5: a 7-day step of 169 h
      'after 2026-11-14T14:00:00.000Z',
      'after 2026-11-21T14:00:00.000Z',
    ]);
    expect(slots[4].at.getTime() - slots[3].at.getTime()).toBe(169 * 3600_000);
    for (const t of localTimes(slots, 'America/New_York')) expect(t).toMatch(/ 09:00:00\.000 /);
  });

  it('America/New_York: a before slot on the fall-back day itself', () => {
    const slots = planReminderSlots(DEFAULTS, new Date('2026-11-02T20:00:00Z'), 'America/New_York');
    expect(iso(slots.filter((s) => s.phase === 'before'))).toEqual([
      'before 2026-10-30T13:00:00.000Z',
      'before 2026-10-31T13:00:00.000Z',
      'before 2026-11-01T14:00:00.000Z', // 25-hour day
    ]);
  });
});

describe('sub-day durations', () => {
  const SECONDS: ReminderPolicy = {
    beforeStart: d('PT6S'),
    beforeEvery: d('PT2S'),
    afterStart: d('PT2S'),
    afterEvery: d('PT2S'),
    afterMax: 3,
    localHour: 9,
  };

  it('are exact offsets from due, milliseconds and time of day kept', () => {
    const due = new Date('2026-03-29T00:59:58.123Z'); // straddles the Paris change at 01:00Z
    expect(iso(planReminderSlots(SECONDS, due, 'Europe/Paris'))).toEqual([
      'before 2026-03-29T00:59:52.123Z',
      'before 2026-03-29T00:59:54.123Z',
      'before 2026-03-29T00:59:56.123Z',
      'after 2026-03-29T01:00:00.123Z',
      'after 2026-03-29T01:00:02.123Z',
      'after 2026-03-29T01:00:04.123Z',
    ]);
  });

  it('PT1S/PT1S before gives one slot, 1 s before due', () => {
    const policy = { ...SECONDS, beforeStart: d('PT1S'), beforeEvery: d('PT1S'), afterStart: d('PT1S'), afterEvery: d('PT1S') };
    const due = new Date('2026-01-01T00:00:04.500Z');
    expect(iso(planReminderSlots(policy, due, 'UTC'))).toEqual([
      'before 2026-01-01T00:00:03.500Z',
      'after 2026-01-01T00:00:05.500Z',
      'after 2026-01-01T00:00:06.500Z',
      'after 2026-01-01T00:00:07.500Z',
    ]);
  });

  it('a duration with a time part is not day-sized', () => {
    expect(isDaySized(d('P1D'))).toBe(true);
    expect(isDaySized(d('P1W'))).toBe(true);
    expect(isDaySized(d('P1M'))).toBe(true);
    expect(isDaySized(d('PT24H'))).toBe(false);
    expect(isDaySized(d('P1DT2H'))).toBe(false);
    expect(isDaySized(d('PT2S'))).toBe(false);
  });
});

describe('futureReminderSlots', () => {
  const due = new Date('2026-06-15T17:00:00Z');

  it('drops the slots before now and keeps one exactly at now', () => {
    const now = new Date('2026-06-14T09:00:00Z');
    expect(iso(futureReminderSlots(DEFAULTS, due, 'UTC', now))).toEqual([
      'before 2026-06-14T09:00:00.000Z',
      'after 2026-06-16T09:00:00.000Z',
      'after 2026-06-23T09:00:00.000Z',
      'after 2026-06-30T09:00:00.000Z',
      'after 2026-07-07T09:00:00.000Z',
    ]);
  });

  it('re-enabled long after the due date: only what is left, no burst', () => {
    const now = new Date('2026-06-25T12:00:00Z');
    expect(iso(futureReminderSlots(DEFAULTS, due, 'UTC', now))).toEqual([
      'after 2026-06-30T09:00:00.000Z',
      'after 2026-07-07T09:00:00.000Z',
    ]);
    expect(futureReminderSlots(DEFAULTS, due, 'UTC', new Date('2026-08-01T00:00:00Z'))).toEqual([]);
  });
});

describe('policy edges', () => {
  it('afterMax 0 gives no after slots', () => {
    const slots = planReminderSlots({ ...DEFAULTS, afterMax: 0 }, new Date('2026-06-15T17:00:00Z'), 'UTC');
    expect(slots.map((s) => s.phase)).toEqual(['before', 'before', 'before']);
  });

  it('month steps are anchored on the due date, not chained (no end-of-month drift)', () => {
    const policy = { ...DEFAULTS, afterStart: d('P1M'), afterEvery: d('P1M'), afterMax: 3 };
    const after = planReminderSlots(policy, new Date('2026-01-31T10:00:00Z'), 'UTC').filter((s) => s.phase === 'after');
    expect(after.map((s) => s.at.toISOString())).toEqual([
      '2026-02-28T09:00:00.000Z',
      '2026-03-31T09:00:00.000Z',
      '2026-04-30T09:00:00.000Z',
    ]);
  });

  it('rejects an unknown time zone', () => {
    expect(() => planReminderSlots(DEFAULTS, new Date(), 'Mars/Olympus_Mons')).toThrow(RangeError);
  });
});

describe('nextSlot / firstSlotFrom agree with the plan', () => {
  const cases: Array<[string, ReminderPolicy, string, string]> = [
    ['defaults in Paris', DEFAULTS, '2026-03-31T15:00:00Z', 'Europe/Paris'],
    ['defaults in New York', DEFAULTS, '2026-10-30T15:00:00Z', 'America/New_York'],
    [
      'seconds',
      { ...DEFAULTS, beforeStart: d('PT7S'), beforeEvery: d('PT2S'), afterStart: d('PT1S'), afterEvery: d('PT3S'), afterMax: 5 },
      '2026-01-01T00:00:30.250Z',
      'UTC',
    ],
  ];

  it.each(cases)('%s', (_name, policy, dueIso, zone) => {
    const due = new Date(dueIso);
    const plan = planReminderSlots(policy, due, zone);
    const first = plan[0].at.getTime();
    const last = plan[plan.length - 1].at.getTime();
    const span = last - first;
    const probes = [...plan.map((s) => s.at.getTime()), ...Array.from({ length: 200 }, (_, i) => first - span * 0.1 + (span * 1.2 * i) / 199)];
    for (const probe of probes.map((t) => Math.round(t))) {
      const t = new Date(probe);
      for (const phase of ['before', 'after'] as const) {
        const mine = plan.filter((s) => s.phase === phase).map((s) => s.at.getTime());
        const rule = phaseRule(policy, phase);
        expect(nextSlot(rule, due, zone, t, true)?.at.getTime() ?? null).toBe(mine.find((m) => m >= probe) ?? null);
        expect(nextSlot(rule, due, zone, t, false)?.at.getTime() ?? null).toBe(mine.find((m) => m > probe) ?? null);
      }
      const next = plan.find((s) => s.at.getTime() >= probe) ?? null;
      expect(firstSlotFrom(policy, due, zone, t)).toEqual(next);
    }
  });
});
