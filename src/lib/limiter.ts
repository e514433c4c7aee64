/**
 * At most `max` holders per key at once; `acquire` waits for a slot. A key's state is dropped
 * when nothing holds or waits for it, so keys that come and go (endpoints) leave nothing behind.
 */
export interface KeyedLimiter {
  acquire(key: string): Promise<() => void>;
}

export function createKeyedLimiter(max: number): KeyedLimiter {
  const states = new Map<string, { held: number; waiters: Array<() => void> }>();
  return {
    acquire(key) {
      let s = states.get(key);
      if (!s) {
        s = { held: 0, waiters: [] };
        states.set(key, s);
      }
      const state = s;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        const next = state.waiters.shift();
        // The slot passes straight to the next waiter: held stays the same.
        if (next) next();
        else if (--state.held === 0) states.delete(key);
      };
      if (state.held < max) {
        state.held++;
        return Promise.resolve(release);
      }
      return new Promise((resolve) => state.waiters.push(() => resolve(release)));
    },
  };
}
