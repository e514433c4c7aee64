// The worker's relayer upkeep (src/chain/relayer.ts): on a timer, every chain's in-flight
// transactions are settled, broadcast again or replaced when stuck, and the relayer's balance is
// read (metric, warning when low). Several workers may run it at once: each chain's pass holds
// that chain's sequence lock.
import type { Relayer } from '../chain/relayer.js';
import type { Logger } from '../log.js';

export interface RelayerUpkeep {
  /** Stops the timer and waits for a pass in progress. */
  stop(): Promise<void>;
}

export function startRelayerUpkeep(relayer: Relayer, intervalMs: number, log: Logger): RelayerUpkeep {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const tick = () => {
    running = relayer
      .upkeep()
      .catch((err: unknown) => log.error({ err }, 'relayer upkeep failed'))
      .finally(() => {
        running = null;
        if (!stopped) timer = setTimeout(tick, intervalMs);
      });
  };
  // First pass at once: a worker restarted after a crash broadcasts what it left recorded.
  tick();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
