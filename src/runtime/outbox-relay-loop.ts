// The worker's side of the outbox: relays every committed row the API's fast path is not handing
// over, woken by the commit's NOTIFY (rows written by jobs and triggers, rows a failed fast path
// gave back), when the hold of a row left to the fast path ends (its API died in between), and on
// a timer (a NOTIFY lost with the listening connection).
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../observability/metrics.js';
import { createOutboxRelay } from '../queue/outbox-relay.js';
import type { QueueSet } from '../queue/queues.js';

export interface OutboxRelayLoop {
  /** Runs a relay pass now (drains every pending row); returns how many rows it handed over. */
  relayNow(): Promise<number>;
  /** Stops the timer and waits for a pass in progress. */
  stop(): Promise<void>;
}

export function startOutboxRelayLoop(db: Queryable, queues: QueueSet, intervalMs: number, log: Logger, metrics: Pick<Metrics, 'outboxSetAside'>): OutboxRelayLoop {
  const relay = createOutboxRelay(db, queues, {
    onSetAside(rows, reason) {
      for (const row of rows) {
        log.warn(
          { outbox_id: row.id, job_name: row.job_name, job_id: row.job_id, reason },
          'outbox row set aside: the job catalogue has no such job; the relay skips it (outbox.failed_at), later rows go on',
        );
      }
      metrics.outboxSetAside.inc({ reason }, rows.length);
    },
  });
  let relaying: Promise<number> | null = null;
  // Wakes the relay when the earliest hold of a pending row ends: a held row's commit wakes no
  // one, so without this a row whose API died before its hand-over would wait for the timer.
  let holdTimer: NodeJS.Timeout | null = null;
  let stopped = false;
  const wakeAtHoldEnd = (ms: number | null) => {
    if (holdTimer) clearTimeout(holdTimer);
    holdTimer = null;
    if (ms === null || stopped) return;
    holdTimer = setTimeout(() => {
      holdTimer = null;
      relayNow().catch((err: unknown) => log.warn({ err }, 'outbox relay failed; will retry'));
    }, Math.max(ms, 0) + 5);
    holdTimer.unref();
  };
  // Asked again while a pass runs (a commit NOTIFYing meanwhile): one more pass right after, so
  // a row committed after the running pass's last read does not wait for the timer.
  let again = false;
  const relayNow = async (): Promise<number> => {
    // One relay pass at a time per process; drain in batches until nothing is pending.
    if (relaying) {
      again = true;
      return relaying;
    }
    relaying = (async () => {
      let total = 0;
      do {
        again = false;
        for (;;) {
          const n = await relay.relay();
          total += n;
          if (n === 0) break;
        }
      } while (again);
      wakeAtHoldEnd(await relay.nextHoldEnd());
      return total;
    })().finally(() => {
      relaying = null;
    });
    return relaying;
  };
  const timer = setInterval(() => {
    relayNow().then(
      (n) => n > 0 && log.info({ handed_over: n }, 'outbox relay handed jobs to the queue'),
      (err) => log.warn({ err }, 'outbox relay failed; will retry'),
    );
  }, intervalMs);
  timer.unref();
  return {
    relayNow,
    async stop() {
      stopped = true;
      clearInterval(timer);
      if (holdTimer) clearTimeout(holdTimer);
      await relaying?.catch(() => undefined);
    },
  };
}
