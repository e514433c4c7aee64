// Wires the API process: pool, producer queues, the outbox fast path, then the Fastify app.
import { Queue } from 'bullmq';
import type { Config } from '../config.js';
import { createPool, type Pool } from '../db/pool.js';
import { buildApp, type AppDeps } from '../http/app.js';
import type { Api } from '../http/types.js';
import type { Logger } from '../log.js';
import { SEND_QUEUE } from '../queue/names.js';
import { createOutboxRelay } from '../queue/outbox-relay.js';
import { producerRedisOptions } from '../queue/redis.js';

const FAST_PATH_TIMEOUT_MS = 2_000;

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]);
}

export interface ApiRuntime {
  app: Api;
  pool: Pool;
  queues: { send: Queue };
  close(): Promise<void>;
}

export async function createApiRuntime(config: Config, log: Logger, extra: Partial<AppDeps> = {}): Promise<ApiRuntime> {
  const pool = createPool(config.databaseUrl);
  const connection = producerRedisOptions(config.redisUrl);
  const send = new Queue(SEND_QUEUE, { connection, prefix: config.redisPrefix });
  // A Queue emits 'error' while Redis is away; the outbox covers those sends, so log and go on.
  send.on('error', (err) => log.debug({ err }, 'send queue connection error'));
  const relay = createOutboxRelay(pool, { send });
  const app = await buildApp({
    config,
    pool,
    log,
    outbox: { publish: (jobIds) => withTimeout(relay.relay(jobIds), FAST_PATH_TIMEOUT_MS, 'enqueue').then(() => undefined) },
    ...extra,
  });
  return {
    app,
    pool,
    queues: { send },
    async close() {
      await app.close();
      await send.close().catch(() => undefined);
      await pool.end();
    },
  };
}
