// Adversarial receivers (docs/events-and-webhooks.md, Delivery and Retries): a 2xx after the
// timeout, a never-ending 200 body, a huge body, a connection closed mid-request, a backlog older
// than the retry window, and the retry schedule as measured between attempts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type ApiClient, type JsonBody } from '../helpers/http.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

const TIMEOUT_MS = 1500;
const FAST = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '400',
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  OUTBOX_RELAY_INTERVAL_MS: '100',
};

type Behaviour = (req: IncomingMessage, res: ServerResponse, n: number) => void;
interface Hit { path: string; n: number; id: string; timestamp: string; signature: string; body: string; at: number }

/** A receiver whose every path can misbehave in its own way (the n-th request, 1-based). */
async function startNastyReceiver() {
  const behaviours = new Map<string, Behaviour>();
  const counts = new Map<string, number>();
  const hits: Hit[] = [];
  const open = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      hits.push({
        path, n, body: Buffer.concat(chunks).toString('utf8'), at: Date.now(),
        id: String(req.headers['webhook-id'] ?? ''), timestamp: String(req.headers['webhook-timestamp'] ?? ''), signature: String(req.headers['webhook-signature'] ?? ''),
      });
      open.add(res);
      res.on('close', () => open.delete(res));
      (behaviours.get(path) ?? ((_q, r) => r.writeHead(200).end('ok')))(req, res, n);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    hits,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    on: (path: string, b: Behaviour) => void behaviours.set(path, b),
    at: (path: string) => hits.filter((h) => h.path === path),
    async close() {
      for (const r of open) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let fx: ApiFixture;
let api: ApiClient;
let rx: Awaited<ReturnType<typeof startNastyReceiver>>;
const cleanups: (() => Promise<unknown>)[] = [];
const timers = new Set<NodeJS.Timeout>();

beforeAll(async () => {
  fx = await startApiFixture(FAST);
  api = apiClient(fx.api.app);
  rx = await startNastyReceiver();
});
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  for (const t of timers) clearInterval(t);
  await rx?.close();
  await fx?.close();
});

async function worker(overrides: Record<string, string> = {}): Promise<WorkerRuntime> {
  const w = await startWorker(fx.env.config({ ...FAST, ...overrides }));
  cleanups.push(() => w.close());
  return w;
}

async function merchant(): Promise<MerchantKeys> {
  return (await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Nasty Receivers Ltd', email: null })).keys;
}

async function endpoint(key: string, path: string): Promise<JsonBody> {
  const res = await api.post('/v1/webhook_endpoints', key, { url: rx.url(path), enabled_events: ['invoice.created'] });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

async function invoice(key: string): Promise<string> {
  const res = await api.post('/v1/invoices', key, { customer_email: 'nasty@example.test', amount: '10', network: 'base-sepolia' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.id;
}

async function deliveries(key: string, endpointId: string): Promise<JsonBody[]> {
  const res = await api.get(`/v1/webhook_endpoints/${endpointId}/deliveries`, key);
  expect(res.status).toBe(200);
  return res.body.data as unknown as JsonBody[];
}

describe('adversarial receivers', () => {
  it('a 200 that arrives after WEBHOOK_TIMEOUT_MS is a failed attempt ("timed out"), retried with the same webhook-id', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/late');
    // The first request is answered 200 only well after the timeout; later ones at once.
    rx.on('/late', (_req, res, n) => {
      if (n > 1) return void res.writeHead(200).end('ok');
      const t = setTimeout(() => { if (!res.destroyed) res.writeHead(200).end('too late'); }, TIMEOUT_MS * 2);
      timers.add(t);
    });
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status === 'succeeded', 30_000);
    const [d] = await deliveries(keys.sandbox, ep.id);
    expect(d.attempt_count).toBe(2);
    expect(d.attempts[0]).toMatchObject({ status_code: null, error: `timed out after ${TIMEOUT_MS} ms` });
    expect(d.attempts[1]).toMatchObject({ status_code: 200, error: null });
    expect(new Set(rx.at('/late').map((h) => h.id)).size).toBe(1);
  }, 60_000);

  it('a 200 whose body never ends: the attempt is bounded by the timeout and frees its slot (the next event to that endpoint arrives)', async () => {
    await worker({ WEBHOOK_ENDPOINT_CONCURRENCY: '1' });
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/stream');
    rx.on('/stream', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => { if (res.destroyed) clearInterval(t); else res.write('x'); }, 20);
      timers.add(t);
    });
    const first = await invoice(keys.sandbox);
    const second = await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id)).filter((d) => d.status !== 'pending').length === 2, 30_000);
    const ds = await deliveries(keys.sandbox, ep.id);
    for (const d of ds) {
      expect(d.status).toBe('succeeded');
      expect(d.attempts[0].duration_ms).toBeLessThan(TIMEOUT_MS * 2 + 1000);
    }
    const got = new Set(rx.at('/stream').map((h) => JSON.parse(h.body).data.object.id));
    expect(got).toEqual(new Set([first, second]));
  }, 60_000);

  it('a 200 with a 50 MB body: succeeded, the body is not read to its end', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/huge');
    let written = 0;
    rx.on('/huge', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(50 * 1024 * 1024) });
      const chunk = Buffer.alloc(64 * 1024, 120);
      const pump = () => {
        while (written < 50 * 1024 * 1024 && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    });
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status === 'succeeded', 30_000);
    expect(written).toBeLessThan(50 * 1024 * 1024);
  }, 60_000);

  it('a connection closed mid-request is a failed attempt with an error; the event arrives once the receiver is healthy', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/reset');
    rx.on('/reset', (req, res, n) => (n <= 2 ? req.socket.destroy() : res.writeHead(204).end()));
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status === 'succeeded', 30_000);
    const [d] = await deliveries(keys.sandbox, ep.id);
    expect(d.attempts.map((a: JsonBody) => a.status_code)).toEqual([null, null, 204]);
    expect(d.attempts[0].error).toEqual(expect.any(String));
    expect(d.attempts[0].error.length).toBeGreaterThan(0);
  }, 60_000);

  it('3xx, 4xx and 5xx are each a failed attempt, retried; a 3xx is never followed', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/codes');
    const codes = [301, 307, 308, 400, 410, 429, 503];
    rx.on('/codes', (_req, res, n) => {
      const code = codes[n - 1];
      if (code === undefined) return void res.writeHead(200).end();
      res.writeHead(code, code < 400 ? { location: rx.url('/redirect-target') } : {}).end();
    });
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status === 'succeeded', 30_000);
    const [d] = await deliveries(keys.sandbox, ep.id);
    expect(d.attempts.map((a: JsonBody) => a.status_code)).toEqual([...codes, 200]);
    expect(d.attempts[0].error).toBe('HTTP 301 (redirects are not followed)');
    expect(d.attempts[3].error).toBe('HTTP 400');
    expect(rx.at('/redirect-target')).toEqual([]);
  }, 60_000);

  it('the retry schedule: waits between attempts grow from WEBHOOK_BACKOFF_BASE_MS, doubling, capped at WEBHOOK_BACKOFF_MAX_MS', async () => {
    await worker({ WEBHOOK_BACKOFF_BASE_MS: '300', WEBHOOK_BACKOFF_MAX_MS: '1200', WEBHOOK_RETRY_WINDOW_MS: '600000' });
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/schedule');
    rx.on('/schedule', (_req, res, n) => res.writeHead(n <= 5 ? 500 : 200).end());
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status === 'succeeded', 40_000);
    const hits = rx.at('/schedule');
    expect(hits).toHaveLength(6);
    const gaps = hits.slice(1).map((h, i) => h.at - hits[i].at);
    const wanted = [300, 600, 1200, 1200, 1200];
    // Never early (a little slack for the receiver's and the worker's clocks); never far late.
    gaps.forEach((g, i) => {
      expect(g, `gap ${i + 1}: ${gaps.join(', ')}`).toBeGreaterThanOrEqual(wanted[i] - 50);
      expect(g, `gap ${i + 1}: ${gaps.join(', ')}`).toBeLessThan(wanted[i] + 5000);
    });
  }, 60_000);

  it('a backlog older than the retry window (the worker was down): a first failed attempt is still retried, the window counts from the first attempt, and the endpoint stays enabled', async () => {
    // No worker yet: the delivery waits, as it would while every worker is down.
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/backlog');
    rx.on('/backlog', (_req, res, n) => res.writeHead(n === 1 ? 503 : 200).end());
    const id = await invoice(keys.sandbox);
    // The outage lasted longer than the window (5 s here, 3 days by default): the event and its
    // delivery are that old when a worker comes back.
    await fx.api.pool.query(
      `update webhook_deliveries set created_at = created_at - interval '1 hour' where endpoint_id = $1`, [ep.id],
    );
    await fx.api.pool.query(`update events set created_at = created_at - interval '1 hour' where object_id = $1`, [id]);
    const w = await worker({ WEBHOOK_RETRY_WINDOW_MS: '5000' });
    await waitUntil(async () => (await deliveries(keys.sandbox, ep.id))[0]?.status !== 'pending', 30_000);
    // Stopping drains: every outcome of the worker is recorded (the endpoint's failure clock with it).
    await w.close();
    const [d] = await deliveries(keys.sandbox, ep.id);
    const got = await api.get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox);
    // "retried ... for WEBHOOK_RETRY_WINDOW_MS after the first one [attempt]": one 503 is not the
    // whole window, and an endpoint is disabled only once its attempts failed for the whole window.
    expect({
      attempts: d.attempts.map((a: JsonBody) => a.status_code),
      status: d.status,
      endpoint: { status: got.body.data.status, disabled_reason: got.body.data.disabled_reason },
    }).toEqual({ attempts: [503, 200], status: 'succeeded', endpoint: { status: 'enabled', disabled_reason: null } });
  }, 60_000);
});
