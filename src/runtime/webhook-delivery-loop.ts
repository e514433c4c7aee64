// The worker's webhook deliveries (src/webhooks/deliver-batch.ts): claims due deliveries whenever
// there is room for a batch, so claims, requests and recordings overlap. With nothing due it
// sleeps until the next delivery falls due (a retry, a lease running out), a wake (the
// `webhook_deliveries_due` NOTIFY that emit_event sends at commit, or this process's fan-out job),
// a slot freeing (an endpoint at its bound may have more due), or POLL_MS at most.
import type { Logger } from '../log.js';
import { nextDeliveryDueAt } from '../db/webhook-deliveries.js';
import { createDeliveryPump, type DeliveryPumpDeps } from '../webhooks/deliver-batch.js';

const POLL_MS = 1_000;
/** The least wait when deliveries are due but another claim holds them (its commit is imminent). */
const MIN_WAIT_MS = 20;
const ERROR_WAIT_MS = 1_000;
/** With deliveries in flight, a claim waits for this share of the capacity to be free (bigger batches)... */
const CLAIM_SHARE = 4;
/** ...or this long since the last claim, whichever comes first. */
const CLAIM_EVERY_MS = 25;

export interface WebhookDeliveryLoop {
  /** Deliveries may be due: look now. */
  wake(): void;
  /** Stops claiming and waits for the deliveries in flight (each bounded by the timeouts) to be recorded. */
  stop(): Promise<void>;
}

export interface WebhookDeliveryLoopOptions {
  /** WEBHOOK_CONCURRENCY: deliveries in flight per process. */
  concurrency: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: in flight to one endpoint per process. */
  perEndpoint: number;
  /** WEBHOOK_TIMEOUT_MS. */
  timeoutMs: number;
}

/**
 * The lease outlasts a claimed delivery's time in this process: waiting for a slot (a round of
 * the requests before it, each a host check and a request, both bounded by the timeout), then its
 * own host check and request; the margin is for the database (claim commit, a recording queued
 * behind another). A delivery that waited longer (rounds of slow host checks) is handed back
 * unsent once less than `sendMsFor` of its lease is left. A lease that still runs out only means
 * the delivery may be sent twice (the late outcome is dropped).
 */
export function leaseMsFor(timeoutMs: number): number {
  return 4 * timeoutMs + 15_000;
}

/** The most one delivery's host check and request take, with room for its recording. */
export function sendMsFor(timeoutMs: number): number {
  return 2 * timeoutMs + 10_000;
}

export function startWebhookDeliveryLoop(deps: DeliveryPumpDeps, opts: WebhookDeliveryLoopOptions, log: Logger): WebhookDeliveryLoop {
  const pump = createDeliveryPump(
    { ...deps, onRecordError: (err) => log.warn({ err }, 'could not record webhook delivery outcomes; their leases bring them back') },
    { concurrency: opts.concurrency, perEndpoint: opts.perEndpoint, leaseMs: leaseMsFor(opts.timeoutMs), sendMs: sendMsFor(opts.timeoutMs) },
  );
  const batchMin = Math.max(1, Math.ceil(opts.concurrency / CLAIM_SHARE));
  let stopped = false;
  // A wake that comes while the loop is busy is not lost: it looks again before sleeping.
  let woken = false;
  let sleeper: (() => void) | null = null;
  const wake = () => {
    woken = true;
    sleeper?.();
  };
  pump.onSlotFree(() => sleeper?.());

  // `forWork`: a pending wake ends the sleep at once (deliveries may be due). Waiting for room
  // must not: a wake while the slots are full would turn the wait into a spin that never yields.
  const sleep = (ms: number, forWork = true) =>
    new Promise<void>((resolve) => {
      if (stopped || (forWork && woken)) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        sleeper = null;
        resolve();
      }
      sleeper = done;
    });

  let lastClaimAt = 0;
  const run = async () => {
    while (!stopped) {
      const free = pump.room();
      // Busy: wait for room for a batch worth a statement, or a little while.
      const sinceClaim = Date.now() - lastClaimAt;
      if (free <= 0 || (pump.held() > 0 && free < batchMin && sinceClaim < CLAIM_EVERY_MS)) {
        await sleep(free <= 0 ? POLL_MS : CLAIM_EVERY_MS - sinceClaim, false);
        continue;
      }
      woken = false;
      let claimed: number;
      try {
        claimed = await pump.claim();
        // From the claim's end: slots freed while it ran wait for a batch worth the next one.
        lastClaimAt = Date.now();
      } catch (err) {
        // What the claim leased comes back when the lease runs out.
        log.warn({ err }, 'could not claim webhook deliveries; retrying');
        await sleep(ERROR_WAIT_MS);
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
      await sleep(waitMs);
    }
  };
  const loop = run();
  return {
    wake,
    async stop() {
      stopped = true;
      wake();
      await loop;
      await pump.drain();
    },
  };
}
