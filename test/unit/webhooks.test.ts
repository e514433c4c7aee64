import { describe, expect, it } from 'vitest';
import { checkEnabledEvents, endpointWants, EVENT_TYPES } from '../../src/domain/events.js';
import { attemptsWithin, checkEndpointUrl, isPublicAddress, nextAttemptAt, retryDelayMs, shouldDisableEndpoint } from '../../src/domain/webhooks.js';

describe('public addresses', () => {
  it('accepts global unicast only', () => {
    for (const a of ['8.8.8.8', '93.184.215.14', '2001:4860:4860::8888', '::ffff:8.8.8.8']) expect([a, isPublicAddress(a)]).toEqual([a, true]);
    for (const a of [
      '127.0.0.1', '10.0.0.1', '172.16.0.1', '192.168.1.1', '169.254.169.254', '0.0.0.0', '100.64.0.1', '224.0.0.1', '255.255.255.255',
      '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::1', 'ff02::1', 'not-an-ip',
    ]) expect([a, isPublicAddress(a)]).toEqual([a, false]);
  });

  it('refuses all of ::/8 but IPv4-mapped (judged as IPv4), and IPv6 outside 2000::/3', () => {
    const table: Array<[string, boolean]> = [
      // IPv4-compatible (::/96): ipaddr.js calls these "unicast".
      ['::127.0.0.1', false], ['::7f00:1', false], ['::2', false], ['::8.8.8.8', false], ['::a00:1', false], ['::ffff', false],
      // The rest of ::/8 (0000::/8) and other unassigned space outside 2000::/3.
      ['::1:0:0:1', false], ['0:0:0:0:1::1', false], ['100::1', false], ['400::1', false], ['1000::1', false], ['4000::1', false], ['e000::1', false],
      // IPv4-mapped: whatever the IPv4 address is.
      ['::ffff:7f00:1', false], ['::ffff:169.254.169.254', false], ['::ffff:1.1.1.1', true],
      // Global unicast, minus its special ranges (documentation 2001:db8::/32 and 3fff::/20, Teredo, 6to4, ORCHIDv2, benchmarking).
      ['2606:4700:4700::1111', true], ['2a00:1450:4001::200e', true], ['2400:cb00:2048:1::c629:d7a2', true], ['3fff::1', false],
      ['2001:db8::1', false], ['2001::1', false], ['2002:808:808::1', false], ['2001:20::1', false], ['2001:2::1', false],
    ];
    for (const [a, expected] of table) expect([a, isPublicAddress(a)]).toEqual([a, expected]);
  });
});

describe('endpoint URLs', () => {
  it('absolute http(s) without credentials; https in live', () => {
    expect(checkEndpointUrl('https://example.com/h', 'live').ok).toBe(true);
    expect(checkEndpointUrl('http://example.com/h', 'sandbox').ok).toBe(true);
    expect(checkEndpointUrl('http://example.com/h', 'live').ok).toBe(false);
    expect(checkEndpointUrl('example.com/h', 'sandbox').ok).toBe(false);
    expect(checkEndpointUrl('https://a:b@example.com/', 'sandbox').ok).toBe(false);
    expect(checkEndpointUrl('javascript:alert(1)', 'sandbox').ok).toBe(false);
  });
});

describe('enabled events', () => {
  it('takes "*" alone or known kinds, deduplicated', () => {
    expect(checkEnabledEvents(['*'])).toEqual({ ok: true, value: ['*'] });
    expect(checkEnabledEvents(['invoice.paid', 'invoice.paid'])).toEqual({ ok: true, value: ['invoice.paid'] });
    expect(checkEnabledEvents([]).ok).toBe(false);
    expect(checkEnabledEvents(['*', 'invoice.paid']).ok).toBe(false);
    expect(checkEnabledEvents(['invoice.*']).ok).toBe(false);
    expect(EVENT_TYPES).toHaveLength(25);
    expect(checkEnabledEvents(['payment.reorged_out'])).toEqual({ ok: true, value: ['payment.reorged_out'] });
    expect(checkEnabledEvents(['payment.confirmed', 'invoice.partially_paid'])).toEqual({ ok: true, value: ['payment.confirmed', 'invoice.partially_paid'] });
  });
  it('matches "*" and listed kinds only', () => {
    expect(endpointWants(['*'], 'invoice.paid')).toBe(true);
    expect(endpointWants(['invoice.sent'], 'invoice.paid')).toBe(false);
    expect(endpointWants(['invoice.sent', 'invoice.paid'], 'invoice.paid')).toBe(true);
  });
});

describe('retry schedule', () => {
  const policy = { baseMs: 30_000, maxMs: 7_200_000, windowMs: 3 * 86_400_000 };
  it('doubles from the base and is capped', () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(policy, n))).toEqual([30_000, 60_000, 120_000, 240_000]);
    expect(retryDelayMs(policy, 30)).toBe(7_200_000);
  });
  it('retries for about three days by default, then gives up', () => {
    const attempts = attemptsWithin(policy);
    expect(attempts).toBeGreaterThan(30);
    expect(attempts).toBeLessThan(45);
    const first = new Date(0);
    expect(nextAttemptAt(policy, first, 1, new Date(0))).toEqual(new Date(30_000));
    expect(nextAttemptAt(policy, first, 40, new Date(policy.windowMs - 1000))).toBeNull();
  });
  it('disables an endpoint failing for the whole window', () => {
    const now = new Date(10 * 86_400_000);
    expect(shouldDisableEndpoint(policy, null, now)).toBe(false);
    expect(shouldDisableEndpoint(policy, new Date(now.getTime() - policy.windowMs + 1), now)).toBe(false);
    expect(shouldDisableEndpoint(policy, new Date(now.getTime() - policy.windowMs), now)).toBe(true);
    // A delivery given up after its whole window, with no success since its first attempt.
    const first = new Date(now.getTime() - policy.windowMs + 3_600_000);
    expect(shouldDisableEndpoint(policy, first, now, first)).toBe(true);
    expect(shouldDisableEndpoint(policy, new Date(first.getTime() + 1), now, first)).toBe(false);
  });
});
