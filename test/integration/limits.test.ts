// Abuse limits and input edges: failed authentications throttled per address before any database
// work, /metrics only on the internal port, dashboard logins throttled, slow clients cut off, a
// cap on line items, instants within 1970-9999, canonical zones, absolute http(s) URLs, and
// validation messages that name the field and the rule.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LINE_ITEMS } from '../../src/domain/invoice-limits.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';

let fx: ApiFixture;

beforeAll(async () => {
  fx = await startApiFixture({ AUTH_FAILURE_LIMIT: '5', ADMIN_USER: 'ops', ADMIN_PASSWORD: 'right-password', HTTP_REQUEST_TIMEOUT_MS: '1000', METRICS_PORT: '0' });
});
afterAll(async () => {
  await fx?.close();
});

const key = () => fx.merchant.keys.sandbox;

async function call(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object, headers: Record<string, string> = { 'api-key': key() }, remoteAddress = '127.0.0.1') {
  const res = await fx.api.app.inject({ method, url, headers, remoteAddress, ...(payload ? { payload } : {}) });
  return { status: res.statusCode, headers: res.headers, body: res.json() as { data?: Record<string, unknown>; error?: { type: string; code: string; message: string } } };
}

describe('failed authentication is rate limited per client address', () => {
  it('after AUTH_FAILURE_LIMIT failures the address gets 429 with Retry-After, before any database work; other addresses are not affected', async () => {
    const attacker = '203.0.113.7';
    const bad = { 'api-key': `sp_sandbox_${'x'.repeat(40)}` };
    for (let i = 0; i < 5; i++) expect((await call('GET', '/v1/invoices/inv_nope', undefined, bad, attacker)).status).toBe(401);
    // No key at all counts too.
    const pool = fx.api.pool;
    const query = pool.query.bind(pool);
    let queries = 0;
    pool.query = ((...args: Parameters<typeof query>) => {
      queries++;
      return query(...args);
    }) as typeof pool.query;
    try {
      const blocked = await call('GET', '/v1/invoices/inv_nope', undefined, bad, attacker);
      expect(blocked.status).toBe(429);
      expect(blocked.body.error).toEqual({ type: 'invalid_request_error', code: 'rate_limited', message: expect.any(String) });
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      const blockedNoKey = await call('POST', '/v1/invoices', { customer_email: 'a@example.test', amount: '1' }, {}, attacker);
      expect(blockedNoKey.status).toBe(429);
      expect(queries).toBe(0);
    } finally {
      pool.query = query;
    }
    const other = await call('POST', '/v1/invoices', { customer_email: 'a@example.test', amount: '1' }, { 'api-key': key() }, '198.51.100.9');
    expect(other.status).toBe(200);
  });
});

describe('the failure limit holds under concurrency', () => {
  it('100 simultaneous bad keys from one address: exactly AUTH_FAILURE_LIMIT (5) are looked up and answered 401, the rest 429', async () => {
    const attacker = '203.0.113.80';
    const pool = fx.api.pool;
    const query = pool.query.bind(pool);
    let lookups = 0;
    pool.query = ((...args: Parameters<typeof query>) => {
      lookups++;
      return query(...args);
    }) as typeof pool.query;
    let statuses: number[];
    try {
      statuses = (
        await Promise.all(
          Array.from({ length: 100 }, (_, i) => call('GET', '/v1/invoices/inv_nope', undefined, { 'api-key': `sp_sandbox_${String(i).padStart(40, 'y')}` }, attacker)),
        )
      ).map((r) => r.status);
    } finally {
      pool.query = query;
    }
    expect(statuses.filter((st) => st === 401)).toHaveLength(5);
    expect(statuses.filter((st) => st === 429)).toHaveLength(95);
    expect(lookups).toBeLessThanOrEqual(5);
  });

  it('100 simultaneous requests with a good key from one address all pass: a good key gives its point back', async () => {
    const statuses = (await Promise.all(Array.from({ length: 100 }, () => call('GET', '/v1/invoices', undefined, { 'api-key': key() }, '198.51.100.80')))).map((r) => r.status);
    expect(statuses.filter((st) => st !== 200)).toEqual([]);
    // And bad keys from that address still get their full budget afterwards.
    const bad = { 'api-key': `sp_sandbox_${'z'.repeat(40)}` };
    for (let i = 0; i < 5; i++) expect((await call('GET', '/v1/invoices/inv_nope', undefined, bad, '198.51.100.80')).status).toBe(401);
    expect((await call('GET', '/v1/invoices/inv_nope', undefined, bad, '198.51.100.80')).status).toBe(429);
  });
});

describe('metrics on the internal port only', () => {
  it('the public port answers 404 for /metrics; METRICS_PORT serves them', async () => {
    const res = await call('GET', '/metrics', undefined, {});
    expect(res.status).toBe(404);
    expect(res.body.error?.code).toBe('route_not_found');
    const port = await fx.api.listenMetrics();
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).toContain('http_request_duration_seconds');
    expect(text).toContain('invoice_queue_jobs');
  });
});

describe('dashboard logins', () => {
  it('are throttled per address after repeated failures (429 with Retry-After), even for the right password then', async () => {
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    const guesser = '192.0.2.44';
    const get = (headers: Record<string, string>, remoteAddress = guesser) => fx.api.app.inject({ method: 'GET', url: '/admin/queues', headers, remoteAddress });
    expect((await get({})).statusCode).toBe(401);
    for (let i = 0; i < 10; i++) expect((await get(basic('ops', `guess-${i}`))).statusCode).toBe(401);
    const blocked = await get(basic('ops', 'guess-x'));
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json()).toEqual({ error: { type: 'invalid_request_error', code: 'rate_limited', message: expect.any(String) } });
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect((await get(basic('ops', 'right-password'))).statusCode).toBe(429);
    expect((await get(basic('ops', 'right-password'), '192.0.2.45')).statusCode).toBe(200);
  });

  it('are locked per address and account name: guessing another name from the same address does not lock the right one out', async () => {
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    const shared = '192.0.2.60';
    const get = (headers: Record<string, string>) => fx.api.app.inject({ method: 'GET', url: '/admin/queues', headers, remoteAddress: shared });
    for (let i = 0; i < 10; i++) expect((await get(basic('admin', `guess-${i}`))).statusCode).toBe(401);
    expect((await get(basic('admin', 'guess-x'))).statusCode).toBe(429);
    expect((await get(basic('ops', 'right-password'))).statusCode).toBe(200);
    // Made-up names cannot buy unlimited guesses: 100 failures over all names lock the address.
    for (let n = 0; n < 9; n++) for (let i = 0; i < 10; i++) expect((await get(basic(`name-${n}`, `guess-${i}`))).statusCode).toBe(401);
    expect((await get(basic('another', 'guess'))).statusCode).toBe(429);
    expect((await get(basic('ops', 'right-password'))).statusCode).toBe(429);
  });
});

describe('slow clients', () => {
  let port: number;
  beforeAll(async () => {
    await fx.api.app.listen({ port: 0, host: '127.0.0.1' });
    port = (fx.api.app.server.address() as { port: number }).port;
  });

  it('a body that never finishes arriving is cut off at HTTP_REQUEST_TIMEOUT_MS', async () => {
    const started = Date.now();
    const { closedAfterMs, response } = await new Promise<{ closedAfterMs: number; response: string }>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let response = '';
      socket.on('data', (d) => (response += d.toString('utf8')));
      socket.on('error', reject);
      socket.on('close', () => resolve({ closedAfterMs: Date.now() - started, response }));
      socket.write(`POST /v1/invoices HTTP/1.1\r\nHost: x\r\nApi-Key: ${key()}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"customer_email"`);
      setTimeout(() => socket.destroy(new Error('still open after 10 s')), 10_000);
    });
    expect(closedAfterMs).toBeLessThan(5_000);
    expect(response).toMatch(/^HTTP\/1\.1 408/);
  });

  it('headers that never finish arriving are cut off too', async () => {
    const started = Date.now();
    const closedAfterMs = await new Promise<number>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => resolve(Date.now() - started));
      socket.on('close', () => resolve(Date.now() - started));
      socket.resume(); // read, or the end of the stream (and 'close') is never seen
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      setTimeout(() => reject(new Error('still open after 10 s')), 10_000);
    });
    expect(closedAfterMs).toBeLessThan(5_000);
  });
});

describe('invoice limits and input edges', () => {
  const line = (i: number) => ({ description: `Item ${i}`, quantity: 1, unit_amount: '1' });

  it(`caps line items at ${MAX_LINE_ITEMS} with its own code`, async () => {
    const ok = await call('POST', '/v1/invoices', { customer_email: 'a@example.test', line_items: Array.from({ length: MAX_LINE_ITEMS }, (_, i) => line(i)) });
    expect(ok.status).toBe(200);
    const over = await call('POST', '/v1/invoices', { customer_email: 'a@example.test', line_items: Array.from({ length: MAX_LINE_ITEMS + 1 }, (_, i) => line(i)) });
    expect(over.status).toBe(400);
    expect(over.body.error).toEqual({ type: 'invalid_request_error', code: 'too_many_line_items', message: `line_items must have at most ${MAX_LINE_ITEMS} items` });
  });

  it('refuses instants outside 1970-9999 once the offset is applied; 9999-12-31 plans no slot past year 9999', async () => {
    for (const due_at of ['0001-01-01T00:00:00+15:59', '1969-12-31T23:59:59Z', '1970-01-01T00:30:00+01:00', '9999-12-31T23:59:59-01:00']) {
      const res = await call('POST', '/v1/invoices', { customer_email: 'a@example.test', amount: '1', due_at });
      expect(res.status, due_at).toBe(400);
      expect(res.body.error?.code).toBe('validation_failed');
      expect(res.body.error?.message).toMatch(/^due_at must be/);
    }
    const late = await call('POST', '/v1/invoices', { customer_email: 'late@example.test', amount: '1', due_at: '9999-12-31T00:00:00Z' });
    expect(late.status).toBe(200);
    const id = late.body.data!.id as string;
    expect((await call('POST', `/v1/invoices/${id}/send`)).status).toBe(200);
    const timeline = await call('GET', `/v1/invoices/${id}/reminders`);
    expect(timeline.status).toBe(200);
    const upcoming = timeline.body.data!.upcoming as { scheduled_for: string }[];
    expect(upcoming.length).toBeGreaterThan(0);
    for (const s of upcoming) expect(s.scheduled_for).toMatch(/^9999-12-\d\dT/);
  });

  it('stores a time zone in its canonical IANA spelling', async () => {
    const res = await call('POST', '/v1/invoices', { customer_email: 'zone@example.test', amount: '1', customer_time_zone: 'europe/paris', due_at: '2030-01-01T00:00:00Z' });
    expect(res.status).toBe(200);
    const { rows } = await fx.api.pool.query<{ time_zone: string }>(`select time_zone from customers where email = 'zone@example.test'`);
    expect(rows[0].time_zone).toBe('Europe/Paris');
  });

  it('takes only absolute http(s) URLs with a host', async () => {
    for (const redirect_url of ['http://', 'https://', 'http:///thanks', 'ftp://example.com/x', 'example.com/thanks']) {
      const res = await call('POST', '/v1/payment-links', { name: 'x', min_amount: '1', after_completion: 'redirect', redirect_url });
      expect(res.status, redirect_url).toBe(400);
      expect(res.body.error?.message, redirect_url).toMatch(/^redirect_url must be/);
    }
    const ok = await call('POST', '/v1/payment-links', { name: 'x', min_amount: '1', after_completion: 'redirect', redirect_url: 'https://shop.example/thanks' });
    expect(ok.status).toBe(200);
  });

  it('names the field and the rule in validation messages', async () => {
    const lines = [line(0), line(1), { description: 'Third', quantity: 1.5, unit_amount: '1' }];
    const cases: [object, string][] = [
      [{ customer_email: 'a@example.test', line_items: lines }, 'line_items[2].quantity must be an integer'],
      [{ customer_email: 'a@example.test', amount: '1', max_amount: '5' }, 'unknown field "max_amount"'],
      [{ amount: '1' }, 'customer_email is required'],
      [{ customer_email: 'a@example.test', amount: 1 }, 'amount must be a string'],
      [{ customer_email: 'a@example.test', line_items: [{ description: 'x', quantity: 1, unit_amount: '1', colour: 'red' }] }, 'unknown field "colour" in line_items[0]'],
      [{ customer_email: 'not an email' }, 'customer_email must be an email address'],
      [{ customer_email: 'a@example.test', memo: 'x'.repeat(5001) }, 'memo must be at most 5000 characters long'],
    ];
    for (const [body, message] of cases) {
      const res = await call('POST', '/v1/invoices', body);
      expect(res.status, message).toBe(400);
      expect(res.body.error, message).toEqual({ type: 'invalid_request_error', code: 'validation_failed', message });
    }
    const query = await call('GET', `/v1/invoices/inv_x?colour=red`);
    expect(query.body.error?.message).toBe('unknown query parameter "colour"');
  });
});
