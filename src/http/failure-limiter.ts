// Counts failures (a bad API key, a wrong dashboard password) per client address, in memory: a
// blocked address is refused before any database work. Per process, like the per-key limit.
import { RateLimiterMemory } from 'rate-limiter-flexible';

export interface FailureLimiter {
  /** Milliseconds until the address may try again; 0 when it is not blocked. */
  blockedFor(address: string): Promise<number>;
  fail(address: string): Promise<void>;
}

export function createFailureLimiter(opts: { maxFailures: number; windowMs: number }): FailureLimiter {
  const limiter = new RateLimiterMemory({ points: opts.maxFailures, duration: Math.max(1, Math.ceil(opts.windowMs / 1000)) });
  return {
    async blockedFor(address) {
      const res = await limiter.get(address);
      return res !== null && res.consumedPoints >= opts.maxFailures ? Math.max(1, res.msBeforeNext) : 0;
    },
    async fail(address) {
      await limiter.penalty(address, 1);
    },
  };
}
