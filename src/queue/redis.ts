// The one place Redis connections are built: single Redis (REDIS_URL) or Redis Cluster
// (REDIS_CLUSTER_NODES). Queues, workers, the reminder machinery, health and metrics take what
// this module hands them and never look at the mode again.
//
// Cluster rules this module enforces for everyone:
// - every queue's keys carry a hash tag (`<prefix>:{<tag>}:<queue>:...`), so each BullMQ script,
//   whose keys all belong to one queue, stays in one slot (BullMQ's `{...}` prefix rule);
// - the service's own calls are single-key, or pipelines over one queue's keys; anything that
//   walks the keyspace goes node by node through `masters()`.
import { Cluster, Redis, type ClusterOptions } from 'ioredis';
import type { ConnectionOptions, RedisOptions } from 'bullmq';
import type { Config } from '../config.js';

export type RedisClient = Redis | Cluster;

/** ioredis options from a redis:// or rediss:// URL (BullMQ takes options, not a URL). */
export function redisOptions(url: string): RedisOptions {
  const u = new URL(url);
  const db = u.pathname.replace(/^\//, '');
  return {
    host: u.hostname || '127.0.0.1',
    port: u.port ? Number(u.port) : 6379,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: db ? Number(db) : 0,
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * For producers on a request path: fail a command at once while Redis is unreachable instead
 * of queueing it, so a request never waits on Redis; the outbox keeps what could not be added.
 */
const FAIL_FAST = { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000 } as const;

/**
 * BullMQ prefix of one queue: the deployment's REDIS_PREFIX, then the queue's hash tag. Keys
 * read `bull:{invoice-send}:invoice-send:wait`: they all start with the deployment prefix (one
 * prefix per deployment, per-prefix cleanup) and Redis Cluster hashes only the `{...}` part, so a
 * queue lives in one slot and different queues land on different slots.
 */
export function queuePrefix(redisPrefix: string, hashTag: string): string {
  if (/[{}]/.test(hashTag)) throw new RangeError(`a hash tag cannot contain braces: "${hashTag}"`);
  return `${redisPrefix}:{${hashTag}}`;
}

/**
 * Where the Redis backend's keys live: REDIS_URL, or the cluster of REDIS_CLUSTER_NODES (REDIS_URL
 * then only gives credentials and TLS). Only built with QUEUE_BACKEND=redis, where REDIS_URL is set.
 */
export interface RedisTarget {
  redisUrl: string;
  redisClusterNodes: Config['redisClusterNodes'];
}

export interface RedisConnectionsOptions {
  /**
   * Fail commands at once while Redis is unreachable (API processes: a request never waits on
   * Redis). Workers wait and retry instead.
   */
  failFast?: boolean;
}

export interface RedisConnections {
  readonly mode: 'single' | 'cluster';
  /** `connection` for a BullMQ Queue (shares one client per process in cluster mode). */
  forQueue(): ConnectionOptions;
  /** `connection` for a BullMQ Worker (which opens its own blocking connections from it). */
  forWorker(): ConnectionOptions;
  /** The process's own client: health pings, the reconciler's reads. */
  readonly client: RedisClient;
  /** One connection per master, for commands that walk the keyspace (SCAN) or read node stats. */
  masters(): Promise<Redis[]>;
  /** Closes every client this factory made (BullMQ closes the connections it made itself). */
  close(): Promise<void>;
}

function clusterOptions(failFast: boolean, base: RedisOptions, lazy: boolean): ClusterOptions {
  return {
    lazyConnect: lazy,
    // Reads go to masters too: a replica's copy of a scheduler may lag behind.
    scaleReads: 'master',
    enableOfflineQueue: !failFast,
    // A failover or resharding answers MOVED/TRYAGAIN/CLUSTERDOWN for a moment: retry those.
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: 2_000,
    redisOptions: {
      username: base.username,
      password: base.password,
      ...(base.tls ? { tls: base.tls } : {}),
      ...(failFast ? { maxRetriesPerRequest: FAIL_FAST.maxRetriesPerRequest, connectTimeout: FAIL_FAST.connectTimeout } : { maxRetriesPerRequest: null }),
    },
  };
}

/** Resolves once a cluster client knows the slot map (its `nodes()` are then complete). */
function clusterReady(cluster: Cluster): Promise<void> {
  if (cluster.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onReady = () => {
      cluster.off('end', onEnd);
      resolve();
    };
    const onEnd = () => {
      cluster.off('ready', onReady);
      reject(new Error('Redis Cluster connection closed before it was ready'));
    };
    cluster.once('ready', onReady);
    cluster.once('end', onEnd);
    if (cluster.status === 'wait') cluster.connect().catch(() => undefined);
  });
}

/**
 * Resolves when the store serves keys. On a cluster PING is not enough: a node answers it while
 * refusing every key with CLUSTERDOWN once a master is lost, so the cluster's own state must be ok.
 */
export async function probeRedis(client: RedisClient): Promise<void> {
  if (client instanceof Cluster) {
    const info = String(await client.cluster('INFO'));
    const state = /^cluster_state:(\w+)/m.exec(info)?.[1] ?? 'unknown';
    if (state !== 'ok') throw new Error(`Redis Cluster state is ${state}`);
    return;
  }
  await client.ping();
}

/**
 * A one-off client that fails at once instead of waiting (no offline queue, no retries): for a
 * start-up check that must neither hang nor be refused before it connects. Call connect() first.
 */
export function createProbeClient(target: RedisTarget): RedisClient {
  const base = redisOptions(target.redisUrl);
  const probe = { connectTimeout: 2_000, maxRetriesPerRequest: 0 };
  const client: RedisClient =
    target.redisClusterNodes === null
      ? new Redis({ ...base, ...probe, lazyConnect: true, retryStrategy: () => null })
      : new Cluster(
          target.redisClusterNodes.map((n) => ({ host: n.host, port: n.port })),
          {
            ...clusterOptions(false, base, true),
            clusterRetryStrategy: () => null,
            redisOptions: { ...clusterOptions(false, base, true).redisOptions, ...probe },
          },
        );
  client.on('error', () => undefined);
  return client;
}

/**
 * The connections of one process. In cluster mode, credentials and TLS come from REDIS_URL when
 * it carries them (`rediss://user:pass@any-host`), so a managed cluster needs no extra variable.
 */
export function createRedisConnections(target: RedisTarget, opts: RedisConnectionsOptions = {}): RedisConnections {
  const failFast = opts.failFast ?? false;
  const base = redisOptions(target.redisUrl);
  const nodes = target.redisClusterNodes;
  if (nodes === null) {
    // Consumers' queues wait for Redis to come back (no per-command retry limit).
    const queueOptions = failFast ? { ...base, ...FAIL_FAST } : { ...base, maxRetriesPerRequest: null };
    const client = new Redis(queueOptions);
    return {
      mode: 'single',
      forQueue: () => queueOptions,
      forWorker: () => base,
      client,
      masters: async () => [client],
      async close() {
        client.disconnect();
      },
    };
  }
  const startup = nodes.map((n) => ({ host: n.host, port: n.port }));
  // One cluster client per process for every Queue and the service's own calls (BullMQ leaves a
  // client it was handed open: close() below ends it). Workers duplicate the template, which
  // itself never connects.
  const shared = new Cluster(startup, clusterOptions(failFast, base, false));
  let template: Cluster | null = null;
  return {
    mode: 'cluster',
    forQueue: () => shared,
    forWorker: () => (template ??= new Cluster(startup, clusterOptions(false, base, true))),
    client: shared,
    async masters() {
      await clusterReady(shared);
      return shared.nodes('master');
    },
    async close() {
      shared.disconnect();
      template?.disconnect();
    },
  };
}
