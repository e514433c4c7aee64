// `events.prune`: run by its job scheduler every EVENTS_PRUNE_EVERY; deletes events older than
// EVENTS_RETENTION_DAYS (at least 30), with their deliveries.
import { pruneEvents } from '../src/db/events.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const eventsPrune: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const cutoff = new Date(Date.now() - ctx.config.events.retentionDays * 86_400_000);
  const deleted = await pruneEvents(ctx.pool, cutoff);
  return `pruned ${deleted} events created before ${cutoff.toISOString()}`;
};
