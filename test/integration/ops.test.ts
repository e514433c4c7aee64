// Operating it: dashboard, health, metrics, rate limit, log redaction, OpenAPI.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { POSTGRES_DASHBOARD_NOTE } from '../../src/http/plugins/dashboard.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime } from '../../src/runtime/api-runtime.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ ADMIN_USER: 'ops', ADMIN_PASSWORD: 's3cret:pass', SMTP_URL: sink.url, RATE_LIMIT_MAX: '1000', METRICS_PORT: '0' });
});
afterAll(async () => {
  await fx?.close();
  await sink?.close();
});

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('queue dashboard', () => {
  it('refuses without credentials, lists every queue with its counts with them', async () => {
    const anonymous = await fx.api.app.inject({ method: 'GET', url: '/admin/queues' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Basic/);
    const wrong = await fx.api.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { authorization: basic('ops', 'nope') } });
    expect(wrong.statusCode).toBe(401);

    const page = await fx.api.app.inject({ method: 'GET', url: '/admin/queues', headers: { authorization: basic('ops', 's3cret:pass') } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/html/);
    const api = await fx.api.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { authorization: basic('ops', 's3cret:pass') } });
    expect(api.statusCode).toBe(200);
    const queues = api.json().queues as { name: string; counts: Record<string, number> }[];
    expect(queues.map((q) => q.name).sort()).toEqual(['chain-watch', 'invoice-reminders-0', 'invoice-send', 'webhooks']);
    for (const q of queues) expect(q.counts).toHaveProperty('waiting');
    // The server panel reads the queue backend's own store; on Postgres the page says what differs.
    const stats = await fx.api.app.inject({ method: 'GET', url: '/admin/queues/api/redis/stats', headers: { authorization: basic('ops', 's3cret:pass') } });
    expect(stats.statusCode).toBe(200);
    const described = (api.json().queues as { description?: string }[]).map((q) => q.description ?? '');
    if (fx.env.queueBackend === 'postgres') {
      expect(stats.json()).toMatchObject({ backend: 'postgres' });
      for (const d of described) expect(d).toBe(POSTGRES_DASHBOARD_NOTE);
    } else {
      expect(stats.json()).toHaveProperty('version');
      expect(described.filter((d) => d !== '')).toEqual([]);
    }
  });

  it('retries and cleans failed jobs', async () => {
    const worker = await startWorker(fx.env.config({ SMTP_URL: sink.url }));
    try {
      const auth = { authorization: basic('ops', 's3cret:pass') };
      // A send whose invoice does not exist fails permanently: one failed job.
      const job = await fx.api.queues.send.add('invoice.send', { invoiceId: 'inv_gone', deliveryId: 'dlv_gone' }, { jobId: 'ops-failing-send' });
      await waitUntil(async () => (await job.getState()) === 'failed', 15_000);
      const firstFinish = (await fx.api.queues.send.getJob(job.id!))!.finishedOn!;

      const retry = await fx.api.app.inject({ method: 'PUT', url: '/admin/queues/api/queues/invoice-send/retry/failed', headers: auth });
      expect(retry.statusCode).toBe(200);
      // Retried: it ran again (and failed again, the invoice still does not exist).
      await waitUntil(async () => {
        const j = await fx.api.queues.send.getJob(job.id!);
        return (await j?.getState()) === 'failed' && (j?.finishedOn ?? 0) > firstFinish;
      });

      // bull-board cleans jobs older than its 5 s grace time: press "clean" until it took.
      await waitUntil(async () => {
        const clean = await fx.api.app.inject({ method: 'PUT', url: '/admin/queues/api/queues/invoice-send/clean/failed', headers: auth });
        expect(clean.statusCode).toBe(200);
        return (await fx.api.queues.send.getFailedCount()) === 0;
      }, 15_000, 500);
      expect(await fx.api.queues.send.getJob(job.id!)).toBeUndefined();
    } finally {
      await worker.close();
    }
  });

  it('is off, and says so, when no credentials are configured', async () => {
    const lines: string[] = [];
    const log = createLogger('info', new Writable({ write: (chunk, _enc, cb) => (lines.push(String(chunk)), cb()) }));
    const api = await createApiRuntime(fx.env.config(), log);
    try {
      const res = await api.app.inject({ method: 'GET', url: '/admin/queues' });
      expect(res.statusCode).toBe(404);
      expect(lines.join('')).toContain('queue dashboard off');
    } finally {
      await api.close();
    }
  });
});

/** A TCP proxy to Redis that the test can cut and restore. */
async function redisProxy(target: string): Promise<{ url: string; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const t = new URL(target);
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(Number(t.port || 6379), t.hostname);
        sockets.add(client).add(upstream);
        client.pipe(upstream).pipe(client);
        const drop = () => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as { port: number }).port;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (server) server.close(() => resolve());
      else resolve();
      server = null;
    });
  await listen();
  return { url: `redis://127.0.0.1:${port}`, cut: stop, restore: listen, close: stop };
}

describe('health', () => {
  it.runIf(inject('queueBackend') === 'redis')('healthz answers; readyz goes 503 naming redis when Redis is unreachable, and back to 200', async () => {
    const proxy = await redisProxy(fx.env.redisUrl!);
    const api = await createApiRuntime(fx.env.config({ REDIS_URL: proxy.url }), createLogger('silent'));
    try {
      expect((await api.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
      await waitUntil(async () => (await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200);
      await proxy.cut();
      await waitUntil(async () => (await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 503);
      const down = (await api.app.inject({ method: 'GET', url: '/readyz' })).json();
      expect(down.failing).toEqual(['redis']);
      expect(down.checks.postgres).toBe('ok');
      await proxy.restore();
      await waitUntil(async () => (await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200, 15_000);
    } finally {
      await api.close();
      await proxy.close();
    }
  });

  it('the worker answers healthz, readyz and metrics on its own port', async () => {
    const worker = await startWorker(fx.env.config({ SMTP_URL: sink.url }));
    try {
      const port = (worker.http.server.address() as { port: number }).port;
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
      const store = fx.env.queueBackend === 'redis' ? 'redis' : 'queue';
      expect(await ready.json()).toEqual({ status: 'ok', checks: { postgres: 'ok', [store]: 'ok' } });
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain('invoice_queue_jobs{queue="invoice-send",state="waiting"}');
      // An unknown path answers the spec's error envelope, as the API does.
      const missing = await fetch(`http://127.0.0.1:${port}/nope?x=1`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toEqual({ error: { type: 'invalid_request_error', code: 'route_not_found', message: 'No route GET /nope.' } });
    } finally {
      await worker.close();
    }
  });
});

describe('metrics', () => {
  const value = (text: string, series: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(series + ' '));
    return line ? Number(line.slice(series.length + 1)) : 0;
  };

  it('after a send, the counters moved', async () => {
    const worker = await startWorker(fx.env.config({ SMTP_URL: sink.url }));
    try {
      const key = fx.merchant.keys.sandbox;
      // The API's metrics are on its internal METRICS_PORT, not on the public app.
      const metricsPort = await fx.api.listenMetrics();
      const apiMetrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const apiBefore = await apiMetrics();
      const created = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers: { 'api-key': key }, payload: { customer_email: 'metrics@example.test', amount: '1' } });
      const id = created.json().data.id;
      expect((await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers: { 'api-key': key } })).statusCode).toBe(200);
      await waitUntil(async () => sink.messages.some((m) => m.subject?.includes('INV-')));
      const workerMetrics = () => worker.metrics.registry.metrics();
      await waitUntil(async () => value(await workerMetrics(), 'invoice_emails_total{kind="invoice",outcome="sent"}') === 1);
      const w = await workerMetrics();
      expect(value(w, 'invoice_job_duration_seconds_count{name="invoice.send",outcome="completed"}')).toBe(1);
      const apiAfter = await apiMetrics();
      const series = 'http_request_duration_seconds_count{method="POST",route="/v1/invoices/:invoiceId/send",status="200"}';
      expect(value(apiAfter, series)).toBe(value(apiBefore, series) + 1);
      expect(apiAfter).toMatch(/invoice_outbox_backlog 0/);
    } finally {
      await worker.close();
    }
  });
});

describe('rate limit', () => {
  it('answers 429 in the error envelope once a key used its budget; other keys are unaffected', async () => {
    const limited = await startApiFixture({ RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '60000' });
    try {
      const get = (key: string) => limited.api.app.inject({ method: 'GET', url: '/v1/payment-links', headers: { 'api-key': key } });
      for (let i = 0; i < 3; i++) expect((await get(limited.merchant.keys.sandbox)).statusCode).toBe(200);
      const res = await get(limited.merchant.keys.sandbox);
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual({ error: { type: 'invalid_request_error', code: 'rate_limited', message: expect.any(String) } });
      // The message names the budget and its window, not the time left in it.
      expect(res.json().error.message).toMatch(/at most 3 per 1 minute\./);
      expect(res.headers['retry-after']).toBeDefined();
      expect((await get(limited.merchant.keys.live)).statusCode).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('logs', () => {
  it('a request with a key logs no key, and every line of the request carries its request id', async () => {
    const lines: string[] = [];
    const log = createLogger('debug', new Writable({ write: (chunk, _enc, cb) => (lines.push(String(chunk)), cb()) }));
    const api = await createApiRuntime(fx.env.config(), log);
    try {
      const merchant = await provisionMerchant(api.pool, { id: 'acct_logtest', name: 'Log Test', email: null });
      for (const header of ['api-key', 'x-api-key']) {
        const res = await api.app.inject({ method: 'GET', url: '/v1/invoices/inv_missing', headers: { [header]: merchant.keys.sandbox, 'x-request-id': `req-${header}` } });
        expect(res.statusCode).toBe(404);
      }
      await api.app.inject({ method: 'GET', url: '/v1/payment-links', headers: { 'api-key': 'sp_sandbox_' + 'x'.repeat(40) } });
      const all = lines.join('');
      expect(all).not.toContain(merchant.keys.sandbox);
      expect(all).not.toContain('x'.repeat(40));
      const requestLines = lines.map((l) => JSON.parse(l) as { reqId?: string; msg: string }).filter((l) => l.reqId === 'req-api-key');
      expect(requestLines.length).toBeGreaterThanOrEqual(2);
    } finally {
      await api.close();
    }
  });
});

describe('OpenAPI', () => {
  it('GET /v1/openapi.json is a valid OpenAPI 3 document, version 1.0.0, covering every endpoint with its errors', async () => {
    const res = await fx.api.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.info.version).toBe('1.0.0');
    const ops = Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ id: `${method.toUpperCase()} ${path}`, op })),
    );
    const ids = ops.map((o) => o.id);
    for (const expected of [
      'PATCH /v1/invoices/{invoiceId}',
      'POST /v1/invoices/{invoiceId}/reminders',
      'POST /v1/invoices/{invoiceId}/send',
      'GET /v1/invoices/{invoiceId}',
      'GET /v1/subscriptions/{subscriptionId}',
      'GET /v1/subscriptions',
      'GET /v1/subscriptions/{subscriptionId}/invoices',
      'POST /v1/subscriptions/{subscriptionId}/cancel',
      'PATCH /v1/payment-links/{paymentLinkId}',
      'GET /v1/payment-links',
      'DELETE /v1/payment-links/{paymentLinkId}',
      'PATCH /v1/products/{productId}',
      'DELETE /v1/credentials/{credentialId}',
      'POST /v1/invoices',
      'POST /v1/products',
      'POST /v1/payment-links',
      'POST /v1/credentials',
    ]) {
      expect(ids).toContain(expected);
    }
    for (const { op } of ops) expect(Object.keys(op.responses)).toContain('401');
  });
});
