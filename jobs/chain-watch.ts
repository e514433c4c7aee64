// One scan of a watched chain for payments: everything is in the watcher (src/chain/watcher.ts),
// which never throws for an RPC outage (it backs off and the next tick retries).
import type { ChainWatchPayload } from '../src/queue/catalogue.js';
import type { JobContext } from '../src/queue/job-context.js';
import type { JobHandler } from '../src/queue/dispatcher.js';

export const chainWatch: JobHandler<ChainWatchPayload, JobContext> = async (payload, ctx) =>
  ctx.watchChain ? ctx.watchChain(payload.chainId) : 'this worker watches no chain';
