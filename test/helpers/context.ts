// Per test file: a database cloned from the migrated template, a Redis key prefix of its own,
// and helpers to build the API over them.
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import { withDatabase } from './global-setup.js';

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
      await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`).finally(() => c.end());
    },
  };
}

/** Deletes every Redis key under the prefix (SCAN, never FLUSHALL: other files share the server). */
export async function deleteRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * The queue store loses everything of this service (a Redis FLUSHALL, or on the Postgres backend
 * every row of the `bullmq` schema), while Postgres keeps the truth.
 */
export async function loseQueueStore(env: TestEnv): Promise<void> {
  if (env.redisUrl) return deleteRedisPrefix(env.redisUrl, env.redisPrefix);
  const c = new pg.Client({ connectionString: env.db.url });
  await c.connect();
  try {
    await c.query('begin');
    for (const table of ['job_log', 'dedup', 'dedup_next', 'job', 'scheduler']) await c.query(`delete from bullmq.${table}`);
    await c.query('commit');
  } finally {
    await c.end();
  }
}

export interface TestEnv {
  db: TestDatabase;
  /** The project's queue backend (vitest.config.ts runs the end-to-end files on both). */
  queueBackend: 'redis' | 'postgres';
  /** Null on the Postgres backend: nothing of the service reaches Redis. */
  redisUrl: string | null;
  redisPrefix: string;
  /** Config for this file's database and prefix, with the given overrides. */
  config(overrides?: Record<string, string>): Config;
  cleanup(): Promise<void>;
}

export async function createTestEnv(): Promise<TestEnv> {
  const db = await createTestDatabase();
  const queueBackend = inject('queueBackend');
  const redisUrl = queueBackend === 'redis' ? inject('redisUrl') : null;
  if (queueBackend === 'redis' && redisUrl === null) throw new Error('the redis project runs only when a Redis was found');
  const redisPrefix = `test-${randomUUID()}`;
  return {
    db,
    queueBackend,
    redisUrl,
    redisPrefix,
    config: (overrides = {}) =>
      loadConfig({
        DATABASE_URL: db.url,
        QUEUE_BACKEND: queueBackend,
        ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
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
      if (redisUrl) await deleteRedisPrefix(redisUrl, redisPrefix);
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
export async function startApiFixture(overrides: Record<string, string> = {}): Promise<ApiFixture> {
  const env = await createTestEnv();
  const config = env.config(overrides);
  const api = await createApiRuntime(config, createLogger('silent'));
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
