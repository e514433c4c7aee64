// `webhook.deliver`: one (event, endpoint). Signs the event per Standard Webhooks with every
// current secret of the endpoint and POSTs it; a 2xx within WEBHOOK_TIMEOUT_MS succeeds. Anything
// else is recorded as an attempt and retried by BullMQ with the capped exponential backoff, until
// the next attempt would fall past the retry window: then the delivery is `failed`. An endpoint
// whose attempts all failed for the whole window is disabled, with the reason.
//
// Every attempt of one event carries the same webhook-id (the event id): a worker that dies
// mid-request leaves the job to be retried, the receiver may get it twice and drops the second.
import { loadEvent } from '../src/db/events.js';
import { withTransaction } from '../src/db/pool.js';
import { failDelivery, findDelivery, recordAttempt } from '../src/db/webhook-deliveries.js';
import { disableEndpoint, endpointForDelivery, markEndpointFailing, markEndpointSucceeded } from '../src/db/webhook-endpoints.js';
import { nextAttemptAt, shouldDisableEndpoint } from '../src/domain/webhooks.js';
import { PermanentJobError } from '../src/errors.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import { signatureHeaders } from '../src/webhooks/sign.js';
import type { WebhookDeliverPayload } from '../src/queue/catalogue.js';
import type { JobContext } from '../src/queue/job-context.js';


export const webhookDeliver: JobHandler<WebhookDeliverPayload, JobContext> = async (payload, ctx, meta) => {
  const delivery = await findDelivery(ctx.pool, payload.eventId, payload.endpointId);
  // Endpoint deleted or event pruned since: nothing is owed any more.
  if (!delivery) return 'gone';
  if (delivery.status !== 'pending') return `already_${delivery.status}`;
  const endpoint = await endpointForDelivery(ctx.pool, payload.endpointId);
  if (!endpoint) return 'gone';
  if (endpoint.status === 'disabled') {
    await failDelivery(ctx.pool, delivery.id, 'the endpoint is disabled');
    ctx.webhooks.countDelivery?.('skipped');
    return 'endpoint_disabled';
  }
  const event = await loadEvent(ctx.pool, payload.eventId);
  if (!event) return 'gone';

  const body = JSON.stringify(ctx.webhooks.renderEvent(event));
  const startedAt = new Date();
  const result = await ctx.webhooks.sender.post(endpoint.url, signatureHeaders(endpoint.secrets, event.id, startedAt, body), body);
  const attempt = { startedAt, statusCode: result.statusCode, durationMs: result.durationMs, error: result.error };

  if (result.error === null) {
    await withTransaction(ctx.pool, async (tx) => {
      await recordAttempt(tx, delivery.id, attempt, { status: 'succeeded', nextAttemptAt: null });
      await markEndpointSucceeded(tx, endpoint.id);
    });
    ctx.webhooks.countDelivery?.('succeeded');
    ctx.webhooks.observeDeliveryLatency?.(Math.max(0, Date.now() - event.created_at.getTime()) / 1000);
    return 'succeeded';
  }

  const now = new Date();
  const next = nextAttemptAt(ctx.webhooks.retry, delivery.created_at, meta.attempt, now);
  const attempts = await withTransaction(ctx.pool, async (tx) => {
    const n = await recordAttempt(tx, delivery.id, attempt, { status: next ? 'pending' : 'failed', nextAttemptAt: next });
    const failingSince = await markEndpointFailing(tx, endpoint.id, startedAt);
    const gaveUpFirstAttemptAt = next ? null : (delivery.first_attempt_at ?? startedAt);
    if (shouldDisableEndpoint(ctx.webhooks.retry, failingSince, now, gaveUpFirstAttemptAt)) {
      const hours = Math.round(ctx.webhooks.retry.windowMs / 360_000) / 10;
      await disableEndpoint(
        tx,
        endpoint.id,
        `Every delivery failed from ${failingSince!.toISOString()} for the whole retry window (${hours} h); last error: ${result.error}`.slice(0, 1000),
      );
    }
    return n;
  });
  ctx.webhooks.countDelivery?.(next ? 'retrying' : 'failed');
  if (!next) throw new PermanentJobError(`delivery failed for good after ${attempts} attempts: ${result.error}`);
  throw new Error(`attempt ${attempts} failed: ${result.error}`);
};
