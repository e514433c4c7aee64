// Per test file: a database cloned from the migrated template, a Redis key prefix of its own,
// and helpers to build the API over them.
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig, type Config, type RedisNode } from '../../src/config.js';
import type { RedisTarget } from '../../src/queue/redis.js';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import type { AppDeps } from '../../src/http/types.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import { withDatabase } from './global-setup.js';
import { deleteRedisPrefix, loseRedisPrefix } from './redis-keys.js';

export { deleteRedisPrefix, scanNode } from './redis-keys.js';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const base = inject('databaseUrl');
  const name = `inv_test_${inject('runId')}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(base, 'postgres') });
  await admin.connect();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`create database ${pg.escapeIdentifier(name)} template ${pg.escapeIdentifier(inject('templateDatabase'))}`);
        break;
      } catch (err) {
        // 55006: the template is briefly in use by a concurrent clone.
        if ((err as { code?: string }).code !== '55006' || attempt > 20) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(base, name),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: withDatabase(base, 'postgres') });
      await c.connect();
      try {
        // A pool of the file that is still ending (a client finishing its last query as the pool
        // closes) would be told "terminating connection due to administrator command" by the forced
        // drop, an uncaught error in the file. Wait for the file's own connections to go first; only
        // one that never goes (a leak) is forced, after a bound.
        for (let waited = 0; waited < 100; waited++) {
          const { rows } = await c.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = $1', [name]);
          if (rows[0].n === 0) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Which Redis this test file runs against: the `cluster` test project runs some files on a local cluster. */
export function testRedisMode(): 'single' | 'cluster' {
  return inject('redisMode') === 'cluster' ? 'cluster' : 'single';
}

/** Where this file's Redis keys live (null on the Postgres backend). */
export function redisTargetOf(env: Pick<TestEnv, 'redisUrl' | 'redisClusterNodes'>): RedisTarget | null {
  return env.redisUrl === null ? null : { redisUrl: env.redisUrl, redisClusterNodes: env.redisClusterNodes };
}

/**
 * The queue store loses everything of this service (a Redis FLUSHALL, or on the Postgres backend
 * every row of the `bullmq` schema), while Postgres keeps the truth.
 */
export async function loseQueueStore(env: TestEnv): Promise<void> {
  const target = redisTargetOf(env);
  if (target) await loseRedisPrefix(target, env.redisPrefix);
  const c = new pg.Client({ connectionString: env.db.url });
  await c.connect();
  try {
    // A worker finishing a job meanwhile locks its job row then others: the deletes may deadlock
    // with it, and Postgres then rolls one of the two back. When that is this transaction, the
    // store was not lost yet: do it again (seen on CI: 'deadlock detected' against move_to_completed).
    for (let attempt = 1; ; attempt++) {
      try {
        await c.query('begin');
        for (const table of ['job_log', 'dedup', 'dedup_next', 'job', 'scheduler']) await c.query(`delete from bullmq.${table}`);
        await c.query('commit');
        return;
      } catch (err) {
        await c.query('rollback');
        if ((err as { code?: string }).code !== '40P01' || attempt === 5) throw err;
      }
    }
  } finally {
    await c.end();
  }
}

export interface TestEnv {
  db: TestDatabase;
  /** The project's queue backend (vitest.config.ts runs the end-to-end files on both). */
  queueBackend: 'redis' | 'postgres';
  /** Null on the Postgres backend: nothing of the service reaches Redis. On a cluster, only credentials. */
  redisUrl: string | null;
  /** Set when this file runs on the local Redis Cluster (the `cluster` project). */
  redisClusterNodes: RedisNode[] | null;
  redisPrefix: string;
  /** Config overrides that point a process at a Redis nobody answers on (single or cluster alike). */
  unreachableRedis(port: number): Record<string, string>;
  /** Config for this file's database and prefix, with the given overrides. */
  config(overrides?: Record<string, string>): Config;
  cleanup(): Promise<void>;
}

export async function createTestEnv(): Promise<TestEnv> {
  const db = await createTestDatabase();
  const queueBackend = inject('queueBackend');
  const redisUrl = queueBackend === 'redis' ? inject('redisUrl') : null;
  if (queueBackend === 'redis' && redisUrl === null) throw new Error('the redis project runs only when a Redis was found');
  const clusterNodes = testRedisMode() === 'cluster' ? inject('redisClusterNodes') : null;
  if (testRedisMode() === 'cluster' && !clusterNodes) throw new Error('the cluster test project runs without a local Redis Cluster');
  const redisPrefix = `test-${randomUUID()}`;
  const redisClusterNodes = clusterNodes ? loadConfig({ DATABASE_URL: 'postgres://unused/x', REDIS_CLUSTER_NODES: clusterNodes }).redisClusterNodes : null;
  return {
    db,
    queueBackend,
    redisUrl,
    redisClusterNodes,
    redisPrefix,
    unreachableRedis: (port): Record<string, string> =>
      clusterNodes ? { REDIS_CLUSTER_NODES: `127.0.0.1:${port}` } : { REDIS_URL: `redis://127.0.0.1:${port}` },
    config: (overrides = {}) =>
      loadConfig({
        DATABASE_URL: db.url,
        QUEUE_BACKEND: queueBackend,
        ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
        ...(clusterNodes ? { REDIS_CLUSTER_NODES: clusterNodes } : {}),
        REDIS_PREFIX: redisPrefix,
        LOG_LEVEL: 'silent',
        PAYMENT_PAGE_BASE: 'https://pay.example.test',
        // Several workers run in one test process: each takes a free port.
        WORKER_PORT: '0',
        HOST: '127.0.0.1',
        MAIL_FROM: 'Billing <billing@example.test>',
        // Most tests use sandbox keys: their sink catches the sandbox mail too, unless a test says otherwise.
        ...(overrides.SMTP_URL && overrides.SANDBOX_SMTP_URL === undefined ? { SANDBOX_SMTP_URL: overrides.SMTP_URL } : {}),
        ...overrides,
      }),
    async cleanup() {
      const target = redisTargetOf({ redisUrl, redisClusterNodes });
      if (target) await deleteRedisPrefix(target, redisPrefix);
      await db.drop();
    },
  };
}

export interface ApiFixture {
  env: TestEnv;
  api: ApiRuntime;
  merchant: { accountId: string; keys: MerchantKeys };
  close(): Promise<void>;
}

/** The API over a fresh database, with one merchant and its four keys. */
export async function startApiFixture(overrides: Record<string, string> = {}, deps: Partial<AppDeps> = {}): Promise<ApiFixture> {
  const env = await createTestEnv();
  const config = env.config(overrides);
  const api = await createApiRuntime(config, createLogger('silent'), deps);
  await api.app.ready();
  const merchant = await provisionMerchant(api.pool, { id: newId('acct'), name: 'Acme Widgets Ltd', email: 'billing@acme.test', timeZone: 'Europe/Paris' });
  return {
    env,
    api,
    merchant,
    async close() {
      await api.close();
      await env.cleanup();
    },
  };
}
