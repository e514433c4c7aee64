import { describe, expect, it } from 'vitest';
import { CADENCE_SECONDS, resolveCadence } from '../../src/domain/cadence.js';

describe('resolveCadence', () => {
  it('knows the fixed intervals (30-day month, 365-day year)', () => {
    expect(CADENCE_SECONDS).toEqual({ daily: 86_400, weekly: 604_800, monthly: 30 * 86_400, yearly: 365 * 86_400 });
  });

  it('defaults to one_time without interval, custom with one', () => {
    expect(resolveCadence(undefined, undefined, 'sandbox')).toEqual({ ok: true, cadence: 'one_time', intervalSeconds: null });
    expect(resolveCadence(undefined, 3600, 'sandbox')).toEqual({ ok: true, cadence: 'custom', intervalSeconds: 3600 });
  });

  it('fills in the interval of a named cadence', () => {
    for (const [cadence, seconds] of Object.entries(CADENCE_SECONDS)) {
      expect(resolveCadence(cadence as keyof typeof CADENCE_SECONDS, undefined, 'sandbox')).toEqual({ ok: true, cadence, intervalSeconds: seconds });
      expect(resolveCadence(cadence as keyof typeof CADENCE_SECONDS, seconds, 'sandbox')).toEqual({ ok: true, cadence, intervalSeconds: seconds });
    }
  });

  it('refuses a named cadence with a different interval', () => {
    const v = resolveCadence('monthly', 31 * 86_400, 'sandbox');
    expect(v.ok).toBe(false);
    expect(!v.ok && v.message).toContain('2592000');
    expect(resolveCadence('daily', 86_401, 'sandbox').ok).toBe(false);
  });

  it('one_time takes no interval; custom needs one', () => {
    expect(resolveCadence('one_time', undefined, 'sandbox')).toEqual({ ok: true, cadence: 'one_time', intervalSeconds: null });
    expect(resolveCadence('one_time', 86_400, 'sandbox').ok).toBe(false);
    expect(resolveCadence('custom', undefined, 'sandbox').ok).toBe(false);
    expect(resolveCadence('custom', 120, 'sandbox')).toEqual({ ok: true, cadence: 'custom', intervalSeconds: 120 });
  });

  it('a custom interval is at least 10 s in the sandbox and an hour in live', () => {
    expect(resolveCadence('custom', 10, 'sandbox')).toEqual({ ok: true, cadence: 'custom', intervalSeconds: 10 });
    expect(resolveCadence('custom', 9, 'sandbox')).toMatchObject({ ok: false, code: 'validation_failed' });
    expect(resolveCadence('custom', 3600, 'live')).toEqual({ ok: true, cadence: 'custom', intervalSeconds: 3600 });
    expect(resolveCadence('custom', 3599, 'live')).toMatchObject({ ok: false, code: 'validation_failed' });
    expect(resolveCadence(undefined, 120, 'live')).toMatchObject({ ok: false, code: 'validation_failed' });
  });
});
