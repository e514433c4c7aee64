// The Postgres queue backend on its own terms: nothing reaches Redis, readiness names BullMQ's
// schema, and the schema belongs to the database it was created in.
import { spawn } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime } from '../../src/runtime/api-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
let fakeRedis: { server: Server; url: string; accepted: number; close(): Promise<void> };

/** A TCP listener that only counts who connects: standing in for a Redis nobody must reach. */
async function connectionCounter(): Promise<typeof fakeRedis> {
  const sockets = new Set<Socket>();
  const counter = {
    accepted: 0,
    server: createServer((s) => {
      counter.accepted++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }),
    url: '',
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => counter.server.close(r));
    },
  };
  await new Promise<void>((r) => counter.server.listen(0, '127.0.0.1', r));
  counter.url = `redis://127.0.0.1:${(counter.server.address() as { port: number }).port}`;
  return counter;
}

beforeAll(async () => {
  sink = await startSmtpSink();
  fakeRedis = await connectionCounter();
  // REDIS_URL set, but QUEUE_BACKEND says postgres: the URL must be ignored.
  fx = await startApiFixture({ QUEUE_BACKEND: 'postgres', REDIS_URL: fakeRedis.url, SMTP_URL: sink.url });
});
afterAll(async () => {
  await fx?.close();
  await sink?.close();
  await fakeRedis?.close();
});

async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: fx.env.db.url });
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

describe('the Postgres queue backend', () => {
  it('sends an invoice end to end with no Redis connection opened at all; the jobs are rows of the bullmq schema', async () => {
    const config = fx.env.config({ QUEUE_BACKEND: 'postgres', REDIS_URL: fakeRedis.url, SMTP_URL: sink.url });
    expect(config).toMatchObject({ queueBackend: 'postgres', redisUrl: null });
    const worker = await startWorker(config);
    try {
      const call = apiClient(() => fx.api.app);
      const created = await call.call('POST', '/v1/invoices', fx.merchant.keys.sandbox, { customer_email: 'no-redis@example.test', amount: '12.5' });
      expect(created.status).toBe(200);
      const sent = await call.call('POST', `/v1/invoices/${created.body.data.id}/send`, fx.merchant.keys.sandbox);
      expect(sent.status).toBe(200);
      await sink.waitFor(1, 20_000);
      const jobs = await query<{ queue: string; name: string }>(`select queue, name from bullmq.job where queue = 'invoice-send'`);
      expect(jobs.map((j) => j.name)).toContain('invoice.send');
      const ready = await fetch(`http://127.0.0.1:${(worker.http.server.address() as { port: number }).port}/readyz`);
      expect(await ready.json()).toEqual({ status: 'ok', checks: { postgres: 'ok', queue: 'ok' } });
    } finally {
      await worker.close();
    }
    expect(fakeRedis.accepted).toBe(0);
  });

  it('readyz goes 503 naming the queue when BullMQ schema cannot be read, and back to 200', async () => {
    const readyz = () => fx.api.app.inject({ method: 'GET', url: '/readyz' });
    expect((await readyz()).statusCode).toBe(200);
    await query('alter schema bullmq rename to bullmq_away');
    try {
      const down = await readyz();
      expect(down.statusCode).toBe(503);
      expect(down.json()).toMatchObject({ status: 'unavailable', failing: ['queue'], checks: { postgres: 'ok' } });
    } finally {
      await query('alter schema bullmq_away rename to bullmq');
    }
    await waitUntil(async () => (await readyz()).statusCode === 200);
  });

  it('claims the schema for its database; a schema claimed by another database refuses to start, naming QUEUE_BACKEND', async () => {
    const [claim] = await query<{ c: string }>(`select obj_description('bullmq'::regnamespace, 'pg_namespace') as c`);
    const [me] = await query<{ oid: string }>('select oid::text from pg_database where datname = current_database()');
    expect(claim.c).toBe(`invoice-lifecycle queues of database ${fx.env.db.name} (oid ${me.oid})`);

    // As if this database were restored from another deployment's dump.
    await query(`comment on schema bullmq is 'invoice-lifecycle queues of database production (oid 1)'`);
    try {
      const config = fx.env.config({ QUEUE_BACKEND: 'postgres' });
      await expect(createApiRuntime(config, createLogger('silent'))).rejects.toSatisfy(
        (err) => err instanceof ConfigError && err.variable === 'QUEUE_BACKEND' && /belongs to production \(oid 1\)/.test(err.message),
      );
      // The process: one line on stderr naming the variable, exit 1.
      const child = spawn(process.execPath, ['--import', 'tsx', 'main/api.ts'], {
        cwd: fileURLToPath(new URL('../../', import.meta.url)),
        env: { ...process.env, DATABASE_URL: fx.env.db.url, QUEUE_BACKEND: 'postgres', PORT: '0', LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      expect(code).toBe(1);
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr).toMatch(/^cannot start: invalid configuration: QUEUE_BACKEND \(postgres\): schema bullmq belongs to production \(oid 1\)/);
    } finally {
      await query(`comment on schema bullmq is null`);
    }
  }, 30_000);
});
