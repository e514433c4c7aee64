// The subscription rules of src/domain/subscriptions.ts: periods, the dunning schedule and the
// next attempt, the failure words, the transitions; and DUNNING_SCHEDULE / DUNNING_FINAL_ACTION
// as the configuration reads them.
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import {
  DEFAULT_DUNNING_SCHEDULE,
  failureMessage,
  formatTokenAmount,
  nextAttemptAt,
  parseDurationList,
  periodEnd,
  periodIndexAt,
  periodStart,
  SUBSCRIPTION_STATUSES,
  SUBSCRIPTION_TRANSITIONS,
  subscriptionNextStatus,
} from '../../src/domain/subscriptions.js';

const BASE_ENV = { DATABASE_URL: 'postgres://u@127.0.0.1/db' };
const t0 = new Date('2026-01-01T00:00:00.000Z');
const clock = { startedAt: t0, intervalSeconds: 30 * 86_400 };

describe('periods', () => {
  it('period k begins at startedAt + k x interval and ends where k + 1 begins', () => {
    expect(periodStart(clock, 0)).toEqual(t0);
    expect(periodStart(clock, 1).toISOString()).toBe('2026-01-31T00:00:00.000Z');
    expect(periodEnd(clock, 1)).toEqual(periodStart(clock, 2));
    for (const k of [0, 1, 2, 17, 1000]) expect(periodIndexAt(clock, periodStart(clock, k))).toBe(k);
    expect(periodIndexAt({ startedAt: t0, intervalSeconds: 10 }, new Date(t0.getTime() + 30_000))).toBe(3);
  });
});

describe('DUNNING_SCHEDULE', () => {
  it('parses increasing ISO-8601 durations, seconds included', () => {
    const d = parseDurationList(DEFAULT_DUNNING_SCHEDULE);
    expect(d.ok && d.value.map((x) => x.toISO())).toEqual(['P1D', 'P3D', 'P5D', 'P7D']);
    const s = parseDurationList(' PT10S , PT30S,PT1M ');
    expect(s.ok && s.value.map((x) => x.toMillis())).toEqual([10_000, 30_000, 60_000]);
  });

  it('refuses empty lists, bad, zero and decreasing entries, naming the entry', () => {
    for (const [text, words] of [
      ['', 'at least one'],
      ['P1D,nope', '"nope"'],
      ['PT0S', '"PT0S"'],
      ['P3D,P1D', 'increasing'],
      ['P1D,P1D', 'increasing'],
    ] as const) {
      const r = parseDurationList(text);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toContain(words);
    }
  });

  it('is read by the configuration with its default, and a bad one names the variable', () => {
    const config = loadConfig(BASE_ENV);
    expect(config.subscriptions.dunningSchedule.map((d) => d.toISO())).toEqual(['P1D', 'P3D', 'P5D', 'P7D']);
    expect(config.subscriptions.dunningFinalAction).toBe('cancel');
    expect(config.subscriptions.pollIntervalMs).toBe(1000);
    const sandbox = loadConfig({ ...BASE_ENV, DUNNING_SCHEDULE: 'PT10S,PT30S', DUNNING_FINAL_ACTION: 'keep' });
    expect(sandbox.subscriptions.dunningSchedule.map((d) => d.toMillis())).toEqual([10_000, 30_000]);
    expect(sandbox.subscriptions.dunningFinalAction).toBe('keep');
    expect(() => loadConfig({ ...BASE_ENV, DUNNING_SCHEDULE: 'P3D,P1D' })).toThrow(/DUNNING_SCHEDULE.*increasing/);
    expect(() => loadConfig({ ...BASE_ENV, DUNNING_FINAL_ACTION: 'retry' })).toThrow(/DUNNING_FINAL_ACTION/);
  });
});

describe('the next attempt', () => {
  const schedule = ['P1D', 'P3D', 'P5D', 'P7D'].map((d) => Duration.fromISO(d));
  const day = (n: number, hours = 0) => new Date(t0.getTime() + n * 86_400_000 + hours * 3_600_000);

  it('follows the schedule from the due time: one attempt at the due time, then one per entry, then none', () => {
    expect(nextAttemptAt(t0, schedule, 1, day(0, 0))).toEqual(day(1));
    expect(nextAttemptAt(t0, schedule, 2, day(1, 0.01))).toEqual(day(3));
    expect(nextAttemptAt(t0, schedule, 3, day(3, 0.01))).toEqual(day(5));
    expect(nextAttemptAt(t0, schedule, 4, day(5, 0.01))).toEqual(day(7));
    expect(nextAttemptAt(t0, schedule, 5, day(7, 0.01))).toBeNull();
  });

  it('does not catch up entries that passed while the service was down (no burst), and a late first attempt is still attempt one', () => {
    expect(nextAttemptAt(t0, schedule, 1, day(4))).toEqual(day(5));
    expect(nextAttemptAt(t0, schedule, 2, day(6))).toEqual(day(7));
    expect(nextAttemptAt(t0, schedule, 1, day(8))).toBeNull();
  });
});

describe('failures', () => {
  const usdc = { amountAtomic: 10_000_000n, decimals: 6, currency: 'USDC' };

  it('says how much is short, in tokens', () => {
    expect(formatTokenAmount(6_500_000n, 6)).toBe('6.50');
    expect(formatTokenAmount(1n, 6)).toBe('0.000001');
    expect(formatTokenAmount(10n ** 18n, 18)).toBe('1.00');
    const balance = failureMessage({ code: 'insufficient_balance', shortAtomic: 6_500_000n, ...usdc });
    expect(balance).toContain('6.50 USDC short');
    expect(balance).toContain('10.00 USDC');
    expect(failureMessage({ code: 'insufficient_allowance', shortAtomic: 2_000_000n, ...usdc })).toContain('2.00 USDC short');
    expect(failureMessage({ code: 'insufficient_allowance', ...usdc })).toMatch(/no longer allows .* 10\.00 USDC/);
    expect(failureMessage({ code: 'subscription_canceled', ...usdc })).toContain('canceled');
    expect(failureMessage({ code: 'subscription_ended', ...usdc })).toContain('end date');
  });
});

describe('transitions', () => {
  it('a failure makes a running subscription past_due, a payment makes it active, cancel and end are final', () => {
    expect(subscriptionNextStatus('active', 'attempt_failed')).toBe('past_due');
    expect(subscriptionNextStatus('past_due', 'period_paid')).toBe('active');
    expect(subscriptionNextStatus('past_due', 'dunning_exhausted_cancel')).toBe('canceled');
    expect(subscriptionNextStatus('past_due', 'dunning_exhausted_keep')).toBe('past_due');
    for (const s of ['canceled', 'ended'] as const) {
      for (const e of Object.keys(SUBSCRIPTION_TRANSITIONS) as (keyof typeof SUBSCRIPTION_TRANSITIONS)[]) expect(subscriptionNextStatus(s, e)).toBeNull();
    }
    for (const s of SUBSCRIPTION_STATUSES) expect(typeof s).toBe('string');
  });
});
