// Counts failures (a bad API key, a wrong dashboard password) per client address, in memory: a
// blocked address is refused before any database work. Per process, like the per-key limit.
//
// A check is a point taken BEFORE the lookup and given back when it succeeds: counting failures
// only once they are answered let 300 simultaneous bad keys through a limit of 20 (every one was
// checked before the first failed). An address has at most `maxFailures` checks in flight beside
// its failures; a check past that waits for one to finish instead of being refused, so a client
// with many concurrent requests and a good key is slowed for a lookup's time, never refused.

export interface FailureLimiter {
  /**
   * Takes a point for a check about to run: 0 when it may run (call `release` once it is
   * decided), else the milliseconds until the address may try again (nothing was taken).
   */
  take(address: string): Promise<number>;
  /** The check is decided: a success gives the point back, a failure keeps it for the window. */
  release(address: string, outcome: 'succeeded' | 'failed'): void;
}

interface AddressState {
  failures: number;
  /** When the failures are forgotten (set by the first one); 0 while there are none. */
  resetAt: number;
  inFlight: number;
  waiters: Array<() => void>;
}

export function createFailureLimiter(opts: { maxFailures: number; windowMs: number }): FailureLimiter {
  const states = new Map<string, AddressState>();

  const stateOf = (address: string): AddressState => {
    let s = states.get(address);
    if (!s) {
      s = { failures: 0, resetAt: 0, inFlight: 0, waiters: [] };
      states.set(address, s);
    }
    if (s.resetAt !== 0 && s.resetAt <= Date.now()) {
      s.failures = 0;
      s.resetAt = 0;
    }
    return s;
  };

  const forgetIfIdle = (address: string, s: AddressState) => {
    if (s.failures === 0 && s.inFlight === 0 && s.waiters.length === 0) states.delete(address);
  };

  const wakeAll = (s: AddressState) => {
    const waiting = s.waiters.splice(0);
    for (const wake of waiting) wake();
  };

  return {
    async take(address) {
      for (;;) {
        const s = stateOf(address);
        if (s.failures >= opts.maxFailures) return Math.max(1, s.resetAt - Date.now());
        if (s.failures + s.inFlight < opts.maxFailures) {
          s.inFlight++;
          return 0;
        }
        // Every point is held by a check in flight: wait for one to be decided, then look again.
        await new Promise<void>((resolve) => s.waiters.push(resolve));
      }
    },
    release(address, outcome) {
      const s = stateOf(address);
      s.inFlight = Math.max(0, s.inFlight - 1);
      if (outcome === 'failed') {
        s.failures++;
        if (s.resetAt === 0) {
          s.resetAt = Date.now() + opts.windowMs;
          // The entry goes when its window ends (an address that never comes back is not kept).
          setTimeout(() => {
            const current = states.get(address);
            if (!current) return;
            if (current.resetAt !== 0 && current.resetAt <= Date.now()) {
              current.failures = 0;
              current.resetAt = 0;
              wakeAll(current);
            }
            forgetIfIdle(address, current);
          }, opts.windowMs).unref();
        }
      }
      wakeAll(s);
      forgetIfIdle(address, s);
    },
  };
}
