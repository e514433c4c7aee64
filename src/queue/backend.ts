// The one place that knows where BullMQ keeps its jobs: Redis (REDIS_URL, or a Redis Cluster with
// REDIS_CLUSTER_NODES) or Postgres (the `bullmq` schema of the service's own database). Every
// Queue and Worker of the service, and every read the service makes of BullMQ's own storage (the
// reconciler's bulk reads, readiness), is built here; the Redis connections themselves come from
// redis.ts. With the Postgres backend no Redis client is ever constructed.
//
// On Redis every queue's keys carry a hash tag (`<REDIS_PREFIX>:{<tag>}:<queue>:...`, see
// queuePrefix), so each BullMQ script and each of the reads below stays in one slot of a cluster.
import {
  Queue,
  Worker,
  createPostgresBackend,
  type IQueueBackend,
  type JobsOptions,
  type PostgresConnectionOptions,
  type Processor,
  type QueueOptions,
  type WorkerOptions,
} from 'bullmq';
import { ConfigError, type Config, type QueueBackendKind } from '../config.js';
import {
  claimQueueSchema,
  createQueueSchemaPool,
  existingQueueJobIds,
  pingQueueSchema,
  queueSchedulerIds,
  QueueSchemaClaimError,
  readQueueMarker,
  removeQueueJobSchedulers,
  writeQueueMarker,
} from '../db/queue-schema.js';
import { createRedisConnections, probeRedis, queuePrefix } from './redis.js';
import { withTimeout } from '../lib/with-timeout.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- job data is typed by the handlers; the
   connection type differs between the backends and is only ever handled in this module. */
/** A BullMQ Queue on either backend. */
export type AppQueue = Queue<any, any, string, any, any, string, IQueueBackend, any>;
/** A BullMQ Worker on either backend. */
export type AppWorker = Worker<any, any, string, IQueueBackend, any, any>;
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * Job options as the Postgres backend is given them: a keep policy with an age keeps by age
 * alone. There, trimming by count deletes with a scan of every job the queue keeps in that state,
 * at each job's end (40-64 ms of the database's CPU a send with 50,000 sends kept, beside
 * 0.3-0.5 ms by age: docs/benchmarks.md, bench:send); a day's jobs on disk need no cap. On Redis
 * the count is a sorted-set trim, and it bounds Redis's memory.
 */
function postgresJobOptions<O extends JobsOptions>(opts: O): O {
  const byAge = (keep: JobsOptions['removeOnComplete']) => (typeof keep === 'object' && 'age' in keep ? { age: keep.age } : keep);
  return { ...opts, removeOnComplete: byAge(opts.removeOnComplete), removeOnFail: byAge(opts.removeOnFail) };
}

/* eslint-disable @typescript-eslint/no-explicit-any -- as AppQueue, below. */
/** A Queue of the Postgres backend: every job it adds goes through postgresJobOptions. */
class PostgresQueue extends Queue<any, any, string, any, any, string, IQueueBackend, any> {
  protected override addJob(name: string, data: any, opts?: JobsOptions) {
    return super.addJob(name, data, opts && postgresJobOptions(opts));
  }
  override addBulk(jobs: Parameters<Queue['addBulk']>[0]) {
    return super.addBulk(jobs.map((j) => (j.opts ? { ...j, opts: postgresJobOptions(j.opts) } : j)));
  }
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Queue options the service sets; the connection (and Redis's key prefix) come from the backend. */
export type QueueExtras = Omit<QueueOptions, 'connection' | 'prefix'>;
export type WorkerExtras = Omit<WorkerOptions, 'connection' | 'prefix'>;

/**
 * `producer`: on a request path (the API): a call fails at once while the store is unreachable
 * instead of waiting; the outbox keeps what could not be added. `consumer`: a worker process, which
 * waits for the store to come back.
 */
export type QueueRole = 'producer' | 'consumer';

export interface QueueBackend {
  readonly kind: QueueBackendKind;
  /**
   * `hashTag`: the `{...}` part of the queue's Redis keys (default: its name); a reminder shard
   * passes its own. The Postgres backend has no use for it.
   */
  queue(name: string, opts?: QueueExtras, hashTag?: string): AppQueue;
  /** A worker of the queue `name`; `hashTag` as the queue's. */
  worker(name: string, processor: Processor, opts: WorkerExtras, hashTag?: string): AppWorker;
  /** What /readyz calls this store (`redis`, or `queue` for the Postgres schema) and its probe. */
  readonly readiness: { name: string; probe(): Promise<unknown> };
  /** Every job scheduler id of the queue, in one read. */
  schedulerIds(queue: AppQueue): Promise<string[]>;
  /**
   * Removes these job schedulers and their pending delayed jobs, as removeJobScheduler does one
   * by one: on Postgres in one statement (one commit instead of one per scheduler), on Redis one
   * script call each, sent together.
   */
  removeSchedulers(queue: AppQueue, schedulerIds: string[]): Promise<void>;
  /** Which of these job ids exist in the queue (any state), in one round trip. */
  existingJobIds(queue: AppQueue, ids: string[]): Promise<Set<string>>;
  /** A small value kept with the queue's own data (gone when the queue store loses it). */
  readMarker(queue: AppQueue, name: string): Promise<string | null>;
  writeMarker(queue: AppQueue, name: string, value: string): Promise<void>;
  /** Closes what the backend itself opened (not the queues and workers it built). */
  close(): Promise<void>;
}

export function queueBackendOf(config: Config, role: QueueRole): QueueBackend {
  return config.queueBackend === 'postgres' ? postgresBackend(config, role) : redisBackend(config, role);
}

function redisBackend(config: Config, role: QueueRole): QueueBackend {
  if (config.redisUrl === null) throw new Error('the redis queue backend needs REDIS_URL');
  // Single Redis or a Cluster client (REDIS_CLUSTER_NODES); producers fail fast, consumers wait.
  const redis = createRedisConnections({ redisUrl: config.redisUrl, redisClusterNodes: config.redisClusterNodes }, { failFast: role === 'producer' });
  // One plain client per process for pings and the reconciler's bulk reads; BullMQ opens its own.
  const client = redis.client;
  client.on('error', () => undefined); // reported by readiness and by the callers' errors
  const prefix = (hashTag: string) => queuePrefix(config.redisPrefix, hashTag);
  const queues: AppQueue[] = [];
  return {
    kind: 'redis',
    queue: (name, opts = {}, hashTag = name) => {
      const queue = new Queue(name, { ...opts, connection: redis.forQueue(), prefix: prefix(hashTag) }) as AppQueue;
      queues.push(queue);
      return queue;
    },
    worker: (name, processor, opts, hashTag = name) =>
      new Worker(name, processor, { ...opts, connection: redis.forWorker(), prefix: prefix(hashTag) }) as unknown as AppWorker,
    readiness: { name: 'redis', probe: () => probeRedis(client) },
    // Scheduler ids are the members of the queue's `repeat` sorted set (one key).
    schedulerIds: (queue) => client.zrange(queue.keys.repeat, '0', '-1'),
    async removeSchedulers(queue, schedulerIds) {
      await Promise.all(schedulerIds.map((id) => queue.removeJobScheduler(id)));
    },
    async existingJobIds(queue, ids) {
      if (ids.length === 0) return new Set();
      // One pipeline over one queue's keys: one hash tag, so one slot (and one node) on a cluster.
      const pipeline = client.pipeline();
      for (const id of ids) pipeline.exists(queue.toKey(id));
      const replies = (await pipeline.exec()) ?? [];
      return new Set(ids.filter((_, i) => replies[i]?.[1] === 1));
    },
    readMarker: (queue, name) => client.get(queue.toKey(name)),
    async writeMarker(queue, name, value) {
      await client.set(queue.toKey(name), value);
    },
    async close() {
      // Queue.close() asks its client to QUIT; a producer's client that is reconnecting refuses
      // (no offline queue) and would go on reconnecting for ever. Disconnecting stops it.
      await Promise.allSettled(queues.map((q) => withTimeout(q.disconnect(), 500, 'queue disconnect')));
      await redis.close();
    },
  };
}

function postgresBackend(config: Config, role: QueueRole): QueueBackend {
  // One pool per process for every Queue and Worker (BullMQ takes a pool as is and leaves it to
  // us): each BullMQ object would otherwise open a pool of its own, and a worker process would
  // hold dozens of connections. The size is the jobs' queries; a Worker checks its LISTEN
  // connection out of it for good, so each Worker built widens the pool by one (a fixed size ran
  // out with send, webhooks, chain and a reminder shard at WORKER_CONCURRENCY=2, and the worker
  // hung at start). The service's own reads of the schema (reconciler, readiness) use it too,
  // with qualified names.
  const pool = createQueueSchemaPool(config.databaseUrl, role === 'producer' ? 4 : 2 + Math.min(config.workerConcurrency, 8));
  const connection: PostgresConnectionOptions = pool;
  // The pool outlives every Queue and Worker on it: close() waits for theirs (each close is
  // idempotent) before ending it, so no BullMQ call meets an ended pool.
  const built: { close(): Promise<void> }[] = [];
  const track = <T extends { close(): Promise<void> }>(o: T): T => (built.push(o), o);
  return {
    kind: 'postgres',
    queue: (name, opts = {}) => track(new PostgresQueue(name, { ...opts, connection }, createPostgresBackend) as AppQueue),
    worker: (name, processor, opts) => {
      pool.options.max += 1;
      return track(new Worker(name, processor, { ...opts, connection }, createPostgresBackend) as unknown as AppWorker);
    },
    readiness: { name: 'queue', probe: () => pingQueueSchema(pool) },
    schedulerIds: (queue) => queueSchedulerIds(pool, queue.name),
    removeSchedulers: (queue, schedulerIds) => removeQueueJobSchedulers(pool, queue.name, schedulerIds),
    existingJobIds: (queue, ids) => existingQueueJobIds(pool, queue.name, ids),
    readMarker: (queue, name) => readQueueMarker(pool, queue.name, name),
    writeMarker: (queue, name, value) => writeQueueMarker(pool, queue.name, name, value),
    async close() {
      await Promise.allSettled(built.map((o) => o.close()));
      await pool.end();
    },
  };
}

/**
 * Before any queue is built: with Postgres, BullMQ's schema (migrated by `migrate`) must belong to
 * this database (see claimQueueSchema); a ConfigError naming QUEUE_BACKEND otherwise.
 */
export async function claimQueueStorage(config: Config): Promise<void> {
  if (config.queueBackend !== 'postgres') return;
  try {
    await claimQueueSchema(config.databaseUrl);
  } catch (err) {
    if (err instanceof QueueSchemaClaimError) throw new ConfigError('QUEUE_BACKEND', `(postgres): ${err.message}`);
    throw err;
  }
}
