import { describe, expect, it } from 'vitest';
import { ConfigError, embeddedPostgresDirOf, loadConfig as load } from '../../src/config.js';

// The entrypoints always load the configuration with a DATABASE_URL (an embedded server's when unset).
const DB = 'postgres://postgres@db.internal:5432/invoices';
const loadConfig = (env: Record<string, string>) => load({ DATABASE_URL: DB, ...env });

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe('loadConfig defaults', () => {
  it('gives every default from an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      databaseUrl: DB,
      embeddedPostgresDir: 'var/postgres',
      // Nothing but the database: BullMQ on Postgres, no Redis.
      queueBackend: 'postgres',
      redisUrl: null,
      redisPrefix: 'bull',
      port: 3000,
      // This machine only: a quick start does not offer the sandbox payment, /metrics or the worker port to the network.
      host: '127.0.0.1',
      smtpUrl: null,
      smtpPoolSize: 5,
      outboxDir: 'var/outbox',
      paymentPageBase: 'http://localhost:3000/pay',
      logLevel: 'info',
      // Readable lines on a terminal, JSON otherwise (src/log.ts prettyLogs).
      logFormat: 'auto',
      workerConcurrency: 8,
      workerPort: 3001,
      platformFeeBps: 50,
      bodyLimitBytes: 1_048_576,
      adminUser: null,
      adminPassword: null,
      outboxRelayIntervalMs: 1000,
      shutdownTimeoutMs: 10_000,
    });
    expect(c.reminders.beforeStart.toISO()).toBe('P3D');
    expect(c.reminders.beforeEvery.toISO()).toBe('P1D');
    expect(c.reminders.afterStart.toISO()).toBe('P1D');
    expect(c.reminders.afterEvery.toISO()).toBe('P7D');
    expect(c.reminders.afterMax).toBe(4);
    expect(c.reminders.localHour).toBe(9);
    expect(c.reminders.defaultTimeZone).toBe('UTC');
    expect(c.reconcileEvery.toISO()).toBe('PT1M');
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('DATABASE_URL unset: the commands run an embedded PostgreSQL in EMBEDDED_POSTGRES_DIR (default var/postgres) first', () => {
    expect(embeddedPostgresDirOf({})).toBe('var/postgres');
    expect(embeddedPostgresDirOf({ DATABASE_URL: '', EMBEDDED_POSTGRES_DIR: '/srv/pg' })).toBe('/srv/pg');
    expect(embeddedPostgresDirOf({ DATABASE_URL: DB })).toBeNull();
    const err = configError({ DATABASE_URL: '' });
    expect(err.variable).toBe('DATABASE_URL');
  });

  it('picks the queue backend: redis when REDIS_URL or REDIS_CLUSTER_NODES is set, postgres otherwise, or as QUEUE_BACKEND says', () => {
    expect(loadConfig({ REDIS_URL: 'redis://r:6379' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://r:6379' });
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000,r2:7000' })).toMatchObject({ queueBackend: 'redis' });
    expect(loadConfig({ QUEUE_BACKEND: 'redis' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://127.0.0.1:6379' });
    expect(loadConfig({ QUEUE_BACKEND: 'postgres', REDIS_URL: 'redis://r:6379' })).toMatchObject({ queueBackend: 'postgres', redisUrl: null });
    expect(loadConfig({ QUEUE_BACKEND: '', REDIS_URL: '' })).toMatchObject({ queueBackend: 'postgres', redisUrl: null });
    for (const bad of ['Redis', 'sqlite', 'pg']) {
      const err = configError({ QUEUE_BACKEND: bad });
      expect(err.variable).toBe('QUEUE_BACKEND');
      expect(err.message).toBe(`invalid configuration: QUEUE_BACKEND must be redis or postgres, got "${bad}"`);
    }
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ PORT: '', LOG_LEVEL: '', SMTP_URL: '' })).toMatchObject({ port: 3000, logLevel: 'info', smtpUrl: null });
  });

  it('reads given values', () => {
    const c = loadConfig({
      PORT: ' 8080 ',
      PAYMENT_PAGE_BASE: 'https://pay.example.com/p///',
      SMTP_URL: 'smtps://u:p@mail.example.com:465',
      REMINDERS_BEFORE_START: 'PT2S',
      REMINDERS_DEFAULT_TIME_ZONE: 'Europe/Paris',
      ADMIN_USER: 'admin',
      ADMIN_PASSWORD: 'pw',
      BODY_LIMIT_BYTES: '2048',
    });
    expect(c.port).toBe(8080);
    expect(c.paymentPageBase).toBe('https://pay.example.com/p');
    expect(c.smtpUrl).toBe('smtps://u:p@mail.example.com:465');
    expect(c.reminders.beforeStart.toMillis()).toBe(2000);
    expect(c.reminders.defaultTimeZone).toBe('Europe/Paris');
    expect(c.adminUser).toBe('admin');
    expect(c.bodyLimitBytes).toBe(2048);
  });
});

describe('REDIS_CLUSTER_NODES', () => {
  it('is off by default: single Redis from REDIS_URL', () => {
    expect(loadConfig({}).redisClusterNodes).toBeNull();
  });

  it('reads host:port startup nodes, spaces and IPv6 brackets allowed', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000, 10.0.0.2:7001 ,[::1]:7002' }).redisClusterNodes).toEqual([
      { host: 'r1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
  });

  it('means the Redis backend when QUEUE_BACKEND is unset, with 12 reminder shards by default', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://127.0.0.1:6379', reminderShards: 12 });
    expect(loadConfig({ REDIS_URL: 'redis://r:6379' }).reminderShards).toBe(1);
    expect(loadConfig({}).reminderShards).toBe(1);
  });

  it('is refused with the Postgres backend, in one line naming it', () => {
    const err = configError({ QUEUE_BACKEND: 'postgres', REDIS_CLUSTER_NODES: 'r1:7000' });
    expect(err.variable).toBe('REDIS_CLUSTER_NODES');
    expect(err.message).toContain('QUEUE_BACKEND=redis');
    expect(err.message).not.toContain('\n');
  });
});

describe('loadConfig refuses bad values, naming the variable', () => {
  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['PORT', '1e3'],
    ['REMINDERS_BEFORE_START', '3 days'],
    ['REMINDERS_BEFORE_START', 'P0D'],
    ['REMINDERS_AFTER_EVERY', '7'],
    ['REMINDERS_LOCAL_HOUR', '24'],
    ['REMINDERS_DEFAULT_TIME_ZONE', 'Mars/Olympus'],
    ['RECONCILE_EVERY', 'soon'],
    ['DATABASE_URL', 'mysql://localhost/db'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['SMTP_URL', 'https://mail'],
    ['PAYMENT_PAGE_BASE', 'ftp://pay'],
    ['LOG_LEVEL', 'verbose'],
    ['LOG_FORMAT', 'text'],
    ['PLATFORM_FEE_BPS', '10001'],
    ['BODY_LIMIT_BYTES', '10'],
    ['WORKER_CONCURRENCY', '0'],
    ['REDIS_PREFIX', 'has space'],
    ['REDIS_PREFIX', 'has{tag}'],
    ['REDIS_CLUSTER_NODES', 'localhost'],
    ['REDIS_CLUSTER_NODES', 'a:7000,b'],
    ['REDIS_CLUSTER_NODES', 'a:0'],
    ['REDIS_CLUSTER_NODES', 'redis://a:7000'],
    ['REDIS_CLUSTER_NODES', ' , '],
  ])('%s=%j', (variable, value) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
    expect(err.message).toMatch(/^invalid configuration: /);
  });

  it('ADMIN_USER and ADMIN_PASSWORD go together', () => {
    expect(configError({ ADMIN_USER: 'admin' }).variable).toBe('ADMIN_PASSWORD');
    expect(configError({ ADMIN_PASSWORD: 'pw' }).variable).toBe('ADMIN_USER');
  });

  it('quotes the bad value', () => {
    expect(configError({ PORT: 'abc' }).message).toContain('"abc"');
    expect(configError({ REMINDERS_BEFORE_START: '3 days' }).message).toContain('"3 days"');
  });
});
