import { describe, expect, it } from 'vitest';
import { createFailureLimiter } from '../../src/http/failure-limiter.js';

describe('failure limiter', () => {
  it('a point is taken before the check: concurrent checks past the budget wait, and are refused once failures fill it', async () => {
    const limiter = createFailureLimiter({ maxFailures: 2, windowMs: 60_000 });
    expect(await limiter.take('a')).toBe(0);
    expect(await limiter.take('a')).toBe(0);
    let third: number | null = null;
    const waiting = limiter.take('a').then((ms) => (third = ms));
    await Promise.resolve();
    expect(third).toBeNull();
    limiter.release('a', 'failed');
    limiter.release('a', 'failed');
    await waiting;
    expect(third).toBeGreaterThan(0);
    expect(await limiter.take('b')).toBe(0);
  });

  it('a success gives its point back; a waiting check runs as soon as one does', async () => {
    const limiter = createFailureLimiter({ maxFailures: 1, windowMs: 60_000 });
    expect(await limiter.take('a')).toBe(0);
    const next = limiter.take('a');
    limiter.release('a', 'succeeded');
    expect(await next).toBe(0);
    limiter.release('a', 'failed');
    expect(await limiter.take('a')).toBeGreaterThan(0);
  });

  it('failures are forgotten when the window ends', async () => {
    const limiter = createFailureLimiter({ maxFailures: 1, windowMs: 1_000 });
    expect(await limiter.take('a')).toBe(0);
    limiter.release('a', 'failed');
    const wait = await limiter.take('a');
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(1_000);
    await new Promise((resolve) => setTimeout(resolve, wait));
    expect(await limiter.take('a')).toBe(0);
  });
});
