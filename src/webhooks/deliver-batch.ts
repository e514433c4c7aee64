// One batch of webhook deliveries: claim many due deliveries in one statement (leased to this
// batch), POST them concurrently over the endpoints' kept-alive pools (at most WEBHOOK_ENDPOINT_
// CONCURRENCY in flight to one endpoint per process), record every outcome in one statement.
//
// Each attempt signs the event per Standard Webhooks with every current secret of its endpoint; a
// 2xx within WEBHOOK_TIMEOUT_MS succeeds. Anything else is an attempt, retried with the capped
// exponential backoff (the delivery is due again at next_attempt_at) until the next attempt would
// fall past the retry window: then the delivery is `failed`. An endpoint whose attempts all
// failed for the whole window is disabled, with the reason.
//
// At least once: a batch whose worker dies records nothing, its lease runs out and the deliveries
// are claimed again; the receiver may get one twice, with the same webhook-id (the event id).
import { randomUUID } from 'node:crypto';
import { loadEvents, type EventRow } from '../db/events.js';
import type { Queryable } from '../db/pool.js';
import {
  claimDueDeliveries,
  recordDeliveryOutcomes,
  type AttemptResult,
  type ClaimedDelivery,
  type DeliveryOutcome,
  type EndpointHealth,
} from '../db/webhook-deliveries.js';
import { disableEndpoint } from '../db/webhook-endpoints.js';
import { nextAttemptAt, shouldDisableEndpoint, type RetryPolicy } from '../domain/webhooks.js';
import type { KeyedLimiter } from '../lib/limiter.js';
import type { WebhookSender } from './sender.js';
import { signatureHeaders } from './sign.js';

export type WebhookDeliveryOutcome = 'succeeded' | 'retrying' | 'failed' | 'skipped';

export interface DeliverBatchDeps {
  db: Queryable;
  sender: WebhookSender;
  retry: RetryPolicy;
  /** The event as the API presents it (GET /v1/events/{id}): the body of every delivery. */
  renderEvent(event: EventRow): object;
  /** Slots per endpoint, shared by every batch of the process. */
  endpointSlots: KeyedLimiter;
  /** Metrics: one count per delivery outcome; latency from the event's creation to its 2xx. */
  countDelivery?(outcome: WebhookDeliveryOutcome): void;
  observeDeliveryLatency?(seconds: number): void;
}

export interface BatchSize {
  /** Deliveries claimed at most. */
  limit: number;
  /** Deliveries of one endpoint claimed at most. */
  perEndpoint: number;
  /** How long the claim holds them: longer than the batch can take. */
  leaseMs: number;
}

/** Claims, sends and records one batch; returns how many deliveries it claimed (0: none due). */
export async function deliverBatch(deps: DeliverBatchDeps, size: BatchSize): Promise<number> {
  const leaseId = randomUUID();
  const claimed = await claimDueDeliveries(deps.db, { leaseId, leaseMs: size.leaseMs, limit: size.limit, perEndpoint: size.perEndpoint, scan: size.limit * 10 });
  if (claimed.length === 0) return 0;
  const events = await loadEvents(deps.db, [...new Set(claimed.map((d) => d.event_id))]);
  // Rendered once per event and checked once per host per batch, whatever the number of endpoints.
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

  const attempts = await Promise.all(
    claimed.map(async (d): Promise<{ d: ClaimedDelivery; outcome: DeliveryOutcome } | null> => {
      const event = events.get(d.event_id);
      // Pruned since the claim: its delivery went with it, nothing is owed.
      if (!event) return null;
      if (d.endpoint_status === 'disabled') {
        deps.countDelivery?.('skipped');
        return { d, outcome: { id: d.id, status: 'failed', nextAttemptAt: null, attempt: null, error: 'the endpoint is disabled' } };
      }
      const attempt = await attemptOne(deps, d, event, bodyOf(event), checkHost);
      if (attempt.error === null) {
        deps.countDelivery?.('succeeded');
        deps.observeDeliveryLatency?.(Math.max(0, Date.now() - event.created_at.getTime()) / 1000);
        return { d, outcome: { id: d.id, status: 'succeeded', nextAttemptAt: null, attempt } };
      }
      const next = nextAttemptAt(deps.retry, d.created_at, d.attempt_count + 1, new Date());
      deps.countDelivery?.(next ? 'retrying' : 'failed');
      return { d, outcome: { id: d.id, status: next ? 'pending' : 'failed', nextAttemptAt: next, attempt } };
    }),
  );
  const done = attempts.filter((a) => a !== null);
  const health = endpointHealth(done);
  const { failing } = await recordDeliveryOutcomes(
    deps.db,
    leaseId,
    done.map((a) => a.outcome),
    health,
  );
  await disableFailedEndpoints(deps, done, failing);
  return claimed.length;
}

async function attemptOne(
  deps: DeliverBatchDeps,
  d: ClaimedDelivery,
  event: EventRow,
  body: string,
  checkHost: (url: string) => Promise<string | null>,
): Promise<AttemptResult> {
  const checkStarted = new Date();
  // The host is resolved and checked before the batch's first request to it; the connection's own
  // lookup checks again for every new socket.
  const refused = await checkHost(d.url);
  if (refused !== null) return { startedAt: checkStarted, statusCode: null, durationMs: Date.now() - checkStarted.getTime(), error: refused };
  const release = await deps.endpointSlots.acquire(d.endpoint_id);
  try {
    const startedAt = new Date();
    const result = await deps.sender.post(d.url, signatureHeaders(d.secrets, event.id, startedAt, body), body);
    return { startedAt, statusCode: result.statusCode, durationMs: result.durationMs, error: result.error };
  } finally {
    release();
  }
}

type Done = { d: ClaimedDelivery; outcome: DeliveryOutcome };

/** Per endpoint attempted in the batch: any 2xx stops its failure clock, else its first failure starts it. */
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
 * given up in this batch retried for its whole window with no 2xx from the endpoint since.
 */
async function disableFailedEndpoints(deps: DeliverBatchDeps, done: Done[], failing: { endpointId: string; failingSince: Date }[]): Promise<void> {
  const now = new Date();
  const hours = Math.round(deps.retry.windowMs / 360_000) / 10;
  for (const { endpointId, failingSince } of failing) {
    const mine = done.filter((a) => a.d.endpoint_id === endpointId && a.outcome.attempt && a.outcome.attempt.error !== null);
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
