// `webhook.fanout`: one per event, from an outbox row written before deliveries were written with
// their event (migration 1700000001800: emit_event now writes them itself). Kept so such rows and
// jobs still left at an upgrade deliver: creates a delivery row per enabled endpoint of the
// event's account and environment that wants its kind (and existed when it happened) and wakes the
// delivery loop. Running twice creates nothing twice: rows are unique per (event, endpoint).
import { loadEvent } from '../src/db/events.js';
import { insertDeliveries } from '../src/db/webhook-deliveries.js';
import { endpointsForEvent } from '../src/db/webhook-endpoints.js';
import { endpointWants } from '../src/domain/events.js';
import { newId } from '../src/domain/ids.js';
import type { WebhookFanoutPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const webhookFanout: JobHandler<WebhookFanoutPayload, JobContext> = async (payload, ctx) => {
  const event = await loadEvent(ctx.pool, payload.eventId);
  if (!event) return 'event_gone';
  const endpoints = (await endpointsForEvent(ctx.pool, event.id)).filter((w) => endpointWants(w.enabled_events, event.type));
  await insertDeliveries(ctx.pool, event.id, endpoints.map((w) => ({ id: newId('whd'), endpointId: w.id })));
  ctx.webhooks.deliveriesDue();
  return `fanned out to ${endpoints.length}`;
};
