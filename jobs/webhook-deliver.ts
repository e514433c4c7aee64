// `webhook.deliver`: one (event, endpoint), added by the fan-out before deliveries went out in
// batches (src/webhooks/deliver-batch.ts). No longer produced; a job still queued at an upgrade
// owes nothing of its own: its delivery row is pending and the delivery loop sends it when due.
import type { WebhookDeliverPayload } from '../src/queue/catalogue.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const webhookDeliver: JobHandler<WebhookDeliverPayload, JobContext> = async (_payload, ctx) => {
  ctx.webhooks.deliveriesDue();
  return 'delivered_in_batches';
};
