// Webhook deliveries in batches: many due deliveries are claimed in one statement (leased to the
// claim), POSTed concurrently over the endpoints' kept-alive pools, and their outcomes recorded
// in one statement per flush. At most WEBHOOK_CONCURRENCY deliveries are in flight per process and
// WEBHOOK_ENDPOINT_CONCURRENCY to one endpoint: a claim takes only what can be sent at once (an
// endpoint at its bound is left out of it), so a slow endpoint holds its own slots, never the
// others', and no request waits for a slot after its claim.
//
// Each attempt signs the event per Standard Webhooks with every current secret of its endpoint; a
// 2xx within WEBHOOK_TIMEOUT_MS succeeds. Anything else is an attempt, retried with the capped
// exponential backoff (the delivery is due again at next_attempt_at) until the next attempt would
// fall past the retry window: then the delivery is `failed`. An endpoint whose attempts all
// failed for the whole window is disabled, with the reason.
//
// At least once: outcomes are recorded only under the lease that claimed them. A worker that dies
// records nothing; its leases run out and the deliveries are claimed again, and the receiver may
// get one twice, with the same webhook-id (the event id).
import { randomUUID } from 'node:crypto';
import type { EventRow } from '../db/events.js';
import type { Queryable } from '../db/pool.js';
import {
  claimDueDeliveriesWithEvents,
  recordDeliveryOutcomes,
  type AttemptResult,
  type ClaimedDelivery,
  type DeliveryOutcome,
  type EndpointHealth,
} from '../db/webhook-deliveries.js';
import { disableEndpoint } from '../db/webhook-endpoints.js';
import { nextAttemptAt, shouldDisableEndpoint, type RetryPolicy } from '../domain/webhooks.js';
import type { WebhookSender } from './sender.js';
import { signatureHeaders } from './sign.js';

export type WebhookDeliveryOutcome = 'succeeded' | 'retrying' | 'failed' | 'skipped';

export interface DeliveryPumpDeps {
  db: Queryable;
  sender: WebhookSender;
  retry: RetryPolicy;
  /** The event as the API presents it (GET /v1/events/{id}): the body of every delivery. */
  renderEvent(event: EventRow): object;
  /** Metrics: one count per delivery outcome; latency from the event's creation to its 2xx. */
  countDelivery?(outcome: WebhookDeliveryOutcome): void;
  observeDeliveryLatency?(seconds: number): void;
  /** A recording failed: the deliveries come back when their lease runs out. */
  onRecordError?(err: unknown): void;
}

export interface DeliveryPumpOptions {
  /** WEBHOOK_CONCURRENCY: in flight per process. */
  concurrency: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: in flight to one endpoint per process. */
  perEndpoint: number;
  /** How long a claim holds its deliveries: longer than an attempt and its recording can take. */
  leaseMs: number;
}

export interface DeliveryPump {
  /** Claims due deliveries up to the free capacity and starts them; returns how many. */
  claim(): Promise<number>;
  /** Deliveries in flight now. */
  inFlight(): number;
  /** Called whenever a delivery's slot frees (its outcome is queued for recording). */
  onSlotFree(listener: () => void): void;
  /** Waits until nothing is in flight and every outcome is recorded. */
  drain(): Promise<void>;
}

type Done = { d: ClaimedDelivery; leaseId: string; outcome: DeliveryOutcome };

export function createDeliveryPump(deps: DeliveryPumpDeps, opts: DeliveryPumpOptions): DeliveryPump {
  let inFlight = 0;
  const perEndpoint = new Map<string, number>();
  const slotListeners: Array<() => void> = [];
  let queued: Done[] = [];
  let flushing: Promise<void> | null = null;
  const idleWaiters: Array<() => void> = [];

  const settleIdle = () => {
    if (inFlight === 0 && queued.length === 0 && flushing === null) for (const w of idleWaiters.splice(0)) w();
  };

  // One recording at a time; outcomes that arrive meanwhile wait for the next, one statement each.
  const flush = () => {
    if (flushing) return;
    flushing = (async () => {
      while (queued.length > 0) {
        const batch = queued;
        queued = [];
        try {
          await record(deps, batch);
        } catch (err) {
          deps.onRecordError?.(err);
        }
      }
    })().finally(() => {
      flushing = null;
      if (queued.length > 0) flush();
      else settleIdle();
    });
  };

  const finish = (done: Done | null, endpointId: string) => {
    inFlight--;
    const n = (perEndpoint.get(endpointId) ?? 1) - 1;
    if (n === 0) perEndpoint.delete(endpointId);
    else perEndpoint.set(endpointId, n);
    if (done) queued.push(done);
    flush();
    for (const l of slotListeners) l();
    settleIdle();
  };

  return {
    async claim() {
      const free = opts.concurrency - inFlight;
      if (free <= 0) return 0;
      const busy = [...perEndpoint.entries()];
      const leaseId = randomUUID();
      // The events come with the claim (one statement): a claimed delivery holds its slot only
      // while it is sent, not for another round trip (with one endpoint every delivery is its own
      // event, and reading them after the claim kept the slots, and so the next claim, waiting).
      const { claimed, events } = await claimDueDeliveriesWithEvents(deps.db, {
        leaseId,
        leaseMs: opts.leaseMs,
        limit: free,
        perEndpoint: opts.perEndpoint,
        busyEndpoints: busy.map(([id]) => id),
        busyRemaining: busy.map(([, n]) => Math.max(0, opts.perEndpoint - n)),
        scan: Math.max(free, opts.perEndpoint) * 10,
      });
      if (claimed.length === 0) return 0;
      for (const d of claimed) {
        inFlight++;
        perEndpoint.set(d.endpoint_id, (perEndpoint.get(d.endpoint_id) ?? 0) + 1);
      }
      // Rendered once per event and the host checked once per claim, whatever the endpoints.
      const bodies = new Map<string, string>();
      const hostChecks = new Map<string, Promise<string | null>>();
      const bodyOf = (event: EventRow) => {
        let body = bodies.get(event.id);
        if (body === undefined) {
          body = JSON.stringify(deps.renderEvent(event));
          bodies.set(event.id, body);
        }
        return body;
      };
      const checkHost = (url: string) => {
        const host = new URL(url).hostname;
        let check = hostChecks.get(host);
        if (!check) {
          check = deps.sender.checkHost(url);
          hostChecks.set(host, check);
        }
        return check;
      };
      for (const d of claimed) {
        deliverOne(deps, d, events.get(d.event_id), bodyOf, checkHost).then(
          (outcome) => finish(outcome && { d, leaseId, outcome }, d.endpoint_id),
          // deliverOne does not throw (the sender never does); should it, the lease brings it back.
          () => finish(null, d.endpoint_id),
        );
      }
      return claimed.length;
    },
    inFlight: () => inFlight,
    onSlotFree(listener) {
      slotListeners.push(listener);
    },
    drain() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        settleIdle();
      });
    },
  };
}

/** One attempt, and the delivery's outcome; null when its event is gone (so is the delivery). */
async function deliverOne(
  deps: DeliveryPumpDeps,
  d: ClaimedDelivery,
  event: EventRow | undefined,
  bodyOf: (event: EventRow) => string,
  checkHost: (url: string) => Promise<string | null>,
): Promise<DeliveryOutcome | null> {
  if (!event) return null;
  if (d.endpoint_status === 'disabled') {
    deps.countDelivery?.('skipped');
    return { id: d.id, status: 'failed', nextAttemptAt: null, attempt: null, error: 'the endpoint is disabled' };
  }
  const body = bodyOf(event);
  const startedAt = new Date();
  let attempt: AttemptResult;
  // The host is resolved and checked once per claim, before its first request; every new
  // socket's lookup checks the address it connects to again.
  const refused = await checkHost(d.url);
  if (refused !== null) {
    attempt = { startedAt, statusCode: null, durationMs: Date.now() - startedAt.getTime(), error: refused };
  } else {
    const sentAt = new Date();
    const result = await deps.sender.post(d.endpoint_id, d.url, signatureHeaders(d.secrets, event.id, sentAt, body), body);
    attempt = { startedAt: sentAt, statusCode: result.statusCode, durationMs: result.durationMs, error: result.error };
  }
  if (attempt.error === null) {
    deps.countDelivery?.('succeeded');
    deps.observeDeliveryLatency?.(Math.max(0, Date.now() - event.created_at.getTime()) / 1000);
    return { id: d.id, status: 'succeeded', nextAttemptAt: null, attempt };
  }
  const next = nextAttemptAt(deps.retry, d.created_at, d.attempt_count + 1, new Date());
  deps.countDelivery?.(next ? 'retrying' : 'failed');
  return { id: d.id, status: next ? 'pending' : 'failed', nextAttemptAt: next, attempt };
}

/** Records outcomes (one statement), then disables the endpoints that failed for the whole window. */
async function record(deps: DeliveryPumpDeps, done: Done[]): Promise<void> {
  const { failing } = await recordDeliveryOutcomes(
    deps.db,
    done.map((a) => ({ ...a.outcome, leaseId: a.leaseId })),
    endpointHealth(done),
  );
  await disableFailedEndpoints(deps, done, failing);
}

/** Per endpoint attempted: any 2xx stops its failure clock, else its first failure starts it. */
function endpointHealth(done: Done[]): EndpointHealth[] {
  const byEndpoint = new Map<string, EndpointHealth>();
  for (const { d, outcome } of done) {
    if (!outcome.attempt) continue;
    const h = byEndpoint.get(d.endpoint_id) ?? { endpointId: d.endpoint_id, succeeded: false, firstFailureAt: null };
    if (outcome.attempt.error === null) h.succeeded = true;
    else if (h.firstFailureAt === null || outcome.attempt.startedAt < h.firstFailureAt) h.firstFailureAt = outcome.attempt.startedAt;
    byEndpoint.set(d.endpoint_id, h);
  }
  for (const h of byEndpoint.values()) if (h.succeeded) h.firstFailureAt = null;
  return [...byEndpoint.values()];
}

/**
 * An endpoint still failing is disabled when it failed for the whole window, or when a delivery
 * given up here retried for its whole window with no 2xx from the endpoint since.
 */
async function disableFailedEndpoints(deps: DeliveryPumpDeps, done: Done[], failing: { endpointId: string; failingSince: Date }[]): Promise<void> {
  const now = new Date();
  const hours = Math.round(deps.retry.windowMs / 360_000) / 10;
  for (const { endpointId, failingSince } of failing) {
    const mine = done.filter((a) => a.d.endpoint_id === endpointId && a.outcome.attempt !== null && a.outcome.attempt.error !== null);
    if (mine.length === 0) continue;
    const gaveUp = mine.filter((a) => a.outcome.status === 'failed').map((a) => (a.d.first_attempt_at ?? a.outcome.attempt!.startedAt).getTime());
    const gaveUpFirstAttemptAt = gaveUp.length > 0 ? new Date(Math.max(...gaveUp)) : null;
    if (!shouldDisableEndpoint(deps.retry, failingSince, now, gaveUpFirstAttemptAt)) continue;
    const lastError = mine[mine.length - 1].outcome.attempt!.error;
    await disableEndpoint(
      deps.db,
      endpointId,
      `Every delivery failed from ${failingSince.toISOString()} for the whole retry window (${hours} h); last error: ${lastError}`.slice(0, 1000),
    );
  }
}
