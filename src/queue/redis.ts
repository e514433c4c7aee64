import type { RedisOptions } from 'bullmq';

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
export function producerRedisOptions(url: string): RedisOptions {
  return { ...redisOptions(url), enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2_000 };
}
