// The worker's webhook deliveries: LANES loops, each claiming a batch, sending it and recording
// it, so one lane's database work overlaps the other's requests. A lane that finds nothing due
// sleeps until the next delivery falls due (a retry, a lease running out), a wake (the
// `webhook_deliveries_due` NOTIFY that emit_event sends at commit, or this process's fan-out), or
// POLL_MS at most.
import type { Logger } from '../log.js';
import { nextDeliveryDueAt } from '../db/webhook-deliveries.js';
import { deliverBatch, type DeliverBatchDeps } from '../webhooks/deliver-batch.js';

const LANES = 2;
const POLL_MS = 1_000;
/** The least wait when deliveries are due but another claim holds them (its commit is imminent). */
const MIN_WAIT_MS = 20;
const ERROR_WAIT_MS = 1_000;

export interface WebhookDeliveryLoop {
  /** Deliveries may be due: lanes asleep look now. */
  wake(): void;
  /** Stops claiming and waits for the batches in flight (each bounded by the timeouts). */
  stop(): Promise<void>;
}

export interface WebhookDeliveryLoopOptions {
  /** WEBHOOK_CONCURRENCY: deliveries in flight per process, shared by the lanes. */
  concurrency: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: in flight to one endpoint per process. */
  perEndpoint: number;
  /** WEBHOOK_TIMEOUT_MS. */
  timeoutMs: number;
}

/**
 * The lease outlasts any batch: the host check, the wait for an endpoint slot held by the other
 * lane, and the request are each bounded by the timeout; the margin is for the database. A lease
 * that still runs out only means the delivery may be sent twice (the late outcome is dropped).
 */
export function leaseMsFor(timeoutMs: number): number {
  return 3 * timeoutMs + 15_000;
}

export function startWebhookDeliveryLoop(deps: DeliverBatchDeps, opts: WebhookDeliveryLoopOptions, log: Logger): WebhookDeliveryLoop {
  const size = { limit: Math.max(1, Math.ceil(opts.concurrency / LANES)), perEndpoint: opts.perEndpoint, leaseMs: leaseMsFor(opts.timeoutMs) };
  let stopped = false;
  // Per lane: a wake that came while it was busy is not lost (it looks again before sleeping).
  const woken = Array.from({ length: LANES }, () => false);
  const sleepers = new Map<number, () => void>();

  const sleep = (lane: number, ms: number) =>
    new Promise<void>((resolve) => {
      if (woken[lane] || stopped) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        sleepers.delete(lane);
        resolve();
      }
      sleepers.set(lane, done);
    });

  const run = async (lane: number) => {
    while (!stopped) {
      woken[lane] = false;
      let claimed: number;
      try {
        claimed = await deliverBatch(deps, size);
      } catch (err) {
        // The claimed deliveries come back when their lease runs out.
        log.warn({ err }, 'webhook delivery batch failed; retrying');
        await sleep(lane, ERROR_WAIT_MS);
        continue;
      }
      if (claimed > 0) continue;
      let waitMs = POLL_MS;
      try {
        const next = await nextDeliveryDueAt(deps.db);
        if (next) waitMs = Math.min(POLL_MS, Math.max(MIN_WAIT_MS, next.getTime() - Date.now()));
      } catch (err) {
        log.warn({ err }, 'could not read when the next webhook delivery is due');
      }
      await sleep(lane, waitMs);
    }
  };
  const lanes = Array.from({ length: LANES }, (_, lane) => run(lane));
  const wake = () => {
    woken.fill(true);
    for (const done of [...sleepers.values()]) done();
  };
  return {
    wake,
    async stop() {
      stopped = true;
      wake();
      await Promise.all(lanes);
    },
  };
}
