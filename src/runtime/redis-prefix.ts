// Start-up claim of REDIS_PREFIX for this process's database (see queue/prefix-claim.ts): a
// process of another database finding the prefix taken refuses to start, naming REDIS_PREFIX.
import { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { deploymentIdentity } from '../db/deployment.js';
import type { Queryable } from '../db/pool.js';
import type { Logger } from '../log.js';
import { claimConflictMessage, claimPrefix } from '../queue/prefix-claim.js';
import { redisOptions } from '../queue/redis.js';
import { StartupError } from './startup-error.js';

/** One attempt: resolves when the prefix is this database's, throws StartupError when it is another's. */
export async function claimRedisPrefix(config: Pick<Config, 'redisUrl' | 'redisPrefix'>, db: Queryable, log: Logger): Promise<void> {
  // The Postgres queue backend reaches no Redis: its counterpart is the bullmq schema's claim
  // (db/queue-schema.ts, claimed through queue/backend.ts).
  if (config.redisUrl === null) return;
  const self = await deploymentIdentity(db);
  // A client of its own, failing fast: the process's other clients may queue or refuse commands
  // while Redis is away, and this must neither hang nor be refused before it connects.
  const redis = new Redis({ ...redisOptions(config.redisUrl), lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const result = await claimPrefix(redis, config.redisPrefix, self);
    if (!result.ok) throw new StartupError('REDIS_PREFIX', claimConflictMessage(config.redisPrefix, self, result.owner));
    if (result.claimedNow) log.info({ prefix: config.redisPrefix, database_id: self.id }, 'redis prefix claimed for this database');
  } finally {
    redis.disconnect();
  }
}

/**
 * Claims the prefix, retrying while Redis or Postgres do not answer (a worker must not take a job
 * before the claim holds). A StartupError (another database's prefix) ends the wait.
 */
export async function claimRedisPrefixOrWait(config: Pick<Config, 'redisUrl' | 'redisPrefix'>, db: Queryable, log: Logger, retryMs = 2_000): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await claimRedisPrefix(config, db, log);
    } catch (err) {
      if (err instanceof StartupError) throw err;
      log.warn({ err, attempt }, 'cannot check the Redis prefix claim yet (Redis or Postgres unreachable); retrying');
      await new Promise((r) => setTimeout(r, retryMs));
    }
  }
}
