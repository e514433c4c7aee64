// `idempotency.prune`: on its own job scheduler (hourly). Deletes Idempotency-Key records older
// than their 24 hours. Expired keys are already treated as new by the API; this keeps the table
// from growing without bound.
import { pruneIdempotencyKeys } from '../src/db/idempotency-keys.js';
import { IDEMPOTENCY_KEY_TTL_MS } from '../src/domain/idempotency.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext } from '../src/queue/job-context.js';

export const idempotencyPrune: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const pruned = await pruneIdempotencyKeys(ctx.pool, IDEMPOTENCY_KEY_TTL_MS);
  if (pruned > 0) ctx.log.info({ pruned }, 'expired idempotency keys pruned');
  return `pruned ${pruned}`;
};
