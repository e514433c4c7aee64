// Webhook deliveries in batches: many due deliveries are claimed in one statement (leased to the
// claim), POSTed concurrently over the endpoints' kept-alive pools, and their outcomes recorded
// in one statement per flush. At most WEBHOOK_CONCURRENCY deliveries are in flight per process,
// WEBHOOK_ENDPOINT_CONCURRENCY to one endpoint, and all but a fifth of the slots for one account.
//
// Claimed one batch ahead: besides what is in flight, up to another WEBHOOK_CONCURRENCY claimed
// deliveries wait in memory (per endpoint, up to another WEBHOOK_ENDPOINT_CONCURRENCY), and one
// starts the moment a slot frees. A claim's round trip then overlaps the requests instead of
// leaving the slots it frees idle until it returns. The lease (`leaseMsFor`) covers a round of
// the requests before a waiting delivery; one that waited longer (slow host checks) is handed back
// unsent once less than `sendMs` of its lease is left. A slow endpoint holds its own slots and its
// own waiting deliveries, never the others' (a claim leaves an endpoint at its bound out). On a
// stop the waiting ones are handed back (`release`), due again at once for any worker.
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
  releaseDeliveries,
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
  /** The most one delivery's host check and request can take: a waiting delivery with less of its lease left is handed back, not sent. */
  sendMs: number;
}

export interface DeliveryPump {
  /** Claims due deliveries up to the room left (in flight and waiting) and starts what can start; returns how many. */
  claim(): Promise<number>;
  /** How many more deliveries a claim may take now: two batches' worth, less those in flight and waiting. */
  room(): number;
  /** Deliveries claimed and not yet recorded: in flight or waiting for a slot. */
  held(): number;
  /** Called whenever a delivery's slot frees (its outcome is queued for recording). */
  onSlotFree(listener: () => void): void;
  /** Hands the waiting deliveries back (due at once), then waits until nothing is in flight and every outcome is recorded. */
  drain(): Promise<void>;
}

type Done = { d: ClaimedDelivery; leaseId: string; outcome: DeliveryOutcome };

/** A claimed delivery not yet started, with what its claim prepared for it. */
interface Waiting {
  d: ClaimedDelivery;
  leaseId: string;
  /** Past this (ms since the epoch) its lease may run out before its request ends: handed back. */
  startBy: number;
  event: EventRow | undefined;
  bodyOf: (event: EventRow) => string;
  checkHost: (url: string) => Promise<string | null>;
}

export function createDeliveryPump(deps: DeliveryPumpDeps, opts: DeliveryPumpOptions): DeliveryPump {
  let inFlight = 0;
  /** Per endpoint: in flight. */
  const perEndpoint = new Map<string, number>();
  /** Per endpoint: in flight and waiting (what a claim must leave room for). */
  const heldPerEndpoint = new Map<string, number>();
  /** Per account: in flight. One account's slow endpoints together may not hold every slot. */
  const perAccount = new Map<string, number>();
  const accountBound = accountBoundOf(opts.concurrency);
  let waiting: Waiting[] = [];
  const slotListeners: Array<() => void> = [];
  let queued: Done[] = [];
  let flushing: Promise<void> | null = null;
  let releasing = 0;
  const idleWaiters: Array<() => void> = [];
  const add = (m: Map<string, number>, id: string, by: number) => {
    const n = (m.get(id) ?? 0) + by;
    if (n <= 0) m.delete(id);
    else m.set(id, n);
  };

  const settleIdle = () => {
    if (inFlight === 0 && waiting.length === 0 && queued.length === 0 && flushing === null && releasing === 0) {
      for (const w of idleWaiters.splice(0)) w();
    }
  };

  // Not sent, so handed back under their leases, due again at once for any worker. Should that
  // fail, their leases run out and they are claimed again.
  const release = (unsent: Waiting[]) => {
    if (unsent.length === 0) return;
    for (const w of unsent) add(heldPerEndpoint, w.d.endpoint_id, -1);
    releasing++;
    releaseDeliveries(deps.db, unsent.map((w) => ({ id: w.d.id, leaseId: w.leaseId })))
      .then(
        () => undefined,
        (err: unknown) => deps.onRecordError?.(err),
      )
      .finally(() => {
        releasing--;
        settleIdle();
      });
  };

  // Starts waiting deliveries, oldest claim first, while there are slots: each endpoint's own
  // bound skips its deliveries, not the others'. One whose lease could run out before its request
  // ends (slow host checks and requests before it) is handed back instead: sent under an expired
  // lease, another worker could be sending it too.
  const startWaiting = () => {
    if (waiting.length === 0 || inFlight >= opts.concurrency) return;
    const still: Waiting[] = [];
    const late: Waiting[] = [];
    const now = Date.now();
    for (const w of waiting) {
      if (now > w.startBy) {
        late.push(w);
        continue;
      }
      if (
        inFlight >= opts.concurrency ||
        (perEndpoint.get(w.d.endpoint_id) ?? 0) >= opts.perEndpoint ||
        (perAccount.get(w.d.account_id) ?? 0) >= accountBound
      ) {
        still.push(w);
        continue;
      }
      inFlight++;
      add(perEndpoint, w.d.endpoint_id, 1);
      add(perAccount, w.d.account_id, 1);
      const { d, leaseId } = w;
      deliverOne(deps, d, w.event, w.bodyOf, w.checkHost).then(
        (outcome) => finish(outcome && { d, leaseId, outcome }, d),
        // deliverOne does not throw (the sender never does); should it, the lease brings it back.
        () => finish(null, d),
      );
    }
    waiting = still;
    release(late);
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

  const finish = (done: Done | null, d: ClaimedDelivery) => {
    inFlight--;
    add(perEndpoint, d.endpoint_id, -1);
    add(perAccount, d.account_id, -1);
    add(heldPerEndpoint, d.endpoint_id, -1);
    if (done) queued.push(done);
    flush();
    startWaiting();
    for (const l of slotListeners) l();
    settleIdle();
  };

  const room = () => 2 * opts.concurrency - inFlight - waiting.length;

  return {
    async claim() {
      const free = room();
      if (free <= 0) return 0;
      // An endpoint may hold two batches' worth too: its bound in flight, as many waiting.
      const busy = [...heldPerEndpoint.entries()];
      const leaseId = randomUUID();
      // The lease runs from the claim's statement: counted from before it is sent.
      const startBy = Date.now() + opts.leaseMs - opts.sendMs;
      // The events come with the claim (one statement): a claimed delivery holds its slot only
      // while it is sent, not for another round trip (with one endpoint every delivery is its own
      // event, and reading them after the claim kept the slots, and so the next claim, waiting).
      const { claimed, events } = await claimDueDeliveriesWithEvents(deps.db, {
        leaseId,
        leaseMs: opts.leaseMs,
        limit: free,
        busyEndpoints: busy.map(([id]) => id),
        perEndpoint: 2 * opts.perEndpoint,
        busyRemaining: busy.map(([, n]) => Math.max(0, 2 * opts.perEndpoint - n)),
        scan: Math.max(free, opts.perEndpoint) * 10,
      });
      if (claimed.length === 0) return 0;
      for (const d of claimed) add(heldPerEndpoint, d.endpoint_id, 1);
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
      // A refusal (a lookup that failed or timed out) is not kept: a delivery of the claim that
      // starts later checks again rather than fail on an answer from a round ago.
      const checkHost = (url: string) => {
        const host = new URL(url).hostname;
        let check = hostChecks.get(host);
        if (!check) {
          check = deps.sender.checkHost(url);
          hostChecks.set(host, check);
          const mine = check;
          void mine.then((refused) => {
            if (refused !== null && hostChecks.get(host) === mine) hostChecks.delete(host);
          });
        }
        return check;
      };
      for (const d of claimed) waiting.push({ d, leaseId, startBy, event: events.get(d.event_id), bodyOf, checkHost });
      startWaiting();
      return claimed.length;
    },
    room,
    held: () => inFlight + waiting.length,
    onSlotFree(listener) {
      slotListeners.push(listener);
    },
    drain() {
      // Not started, so not sent: handed back.
      const unsent = waiting;
      waiting = [];
      release(unsent);
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        settleIdle();
      });
    },
  };
}

/**
 * The most deliveries of one account in flight at once: all but a fifth of the slots (all of them
 * below 5). Two endpoints of one tenant that never answer filled the 50 default slots (32 each at
 * most), and another tenant's delivery waited for their timeouts.
 */
export function accountBoundOf(concurrency: number): number {
  return concurrency - Math.floor(concurrency / 5);
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
  // The window runs from the first attempt, not from the delivery's creation: a backlog older than
  // the window (the worker was down) was given up, and its endpoint disabled, after one failure.
  const next = nextAttemptAt(deps.retry, d.first_attempt_at ?? attempt.startedAt, d.attempt_count + 1, new Date());
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
