// The payment page under bad input and abuse: each refusal is its own 4xx as an HTML page, logged
// below error level (never a 500 with a stack); /pay is rate limited per address; the sandbox
// simulate form refuses cross-site posts and checks customer_email like the test helper.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';

const RATE_LIMIT_MAX = 40;
let env: TestEnv;
let api: ApiRuntime;
let keys: MerchantKeys;
const lines: Array<{ level: number; msg?: string }> = [];

beforeAll(async () => {
  env = await createTestEnv();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg?: string });
      done();
    },
  });
  api = await createApiRuntime(env.config({ LOG_LEVEL: 'info', RATE_LIMIT_MAX: String(RATE_LIMIT_MAX), RATE_LIMIT_WINDOW_MS: '600000' }), createLogger('info', sink));
  await api.app.ready();
  keys = (await provisionMerchant(api.pool, { id: newId('acct'), name: 'Page Co', email: null })).keys;
});
afterAll(async () => {
  await api?.close();
  await env?.cleanup();
});

const client = () => apiClient(api.app);
let addressCounter = 0;
/** Each test its own client address, so the per-address rate limit of one does not reach another. */
const freshAddress = () => `198.18.0.${++addressCounter}`;

async function sentInvoiceReference(): Promise<string> {
  const created = await client().post('/v1/invoices', keys.sandbox, { customer_email: 'payer@example.test', amount: '10' });
  expect(created.status, created.raw).toBe(200);
  const sent = await client().post(`/v1/invoices/${created.body.data.id}/send`, keys.sandbox);
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data.reference as string;
}

async function emailLink(): Promise<string> {
  const link = await client().post('/v1/payment-links', keys.sandbox, { name: 'Tips', min_amount: '1', max_amount: '50', collect_email: true });
  expect(link.status, link.raw).toBe(200);
  return link.body.data.id as string;
}

const errorLines = () => lines.filter((l) => l.level >= 50);

describe('bad input on the payment page', () => {
  it('each gets its own 4xx as an HTML page, logged below error level', async () => {
    const ref = await sentInvoiceReference();
    const linkId = await emailLink();
    const remoteAddress = freshAddress();
    const form = 'application/x-www-form-urlencoded';
    const cases: Array<{ name: string; status: number; method: 'GET' | 'POST'; url: string; type?: string; payload?: string }> = [
      { name: 'NUL as the page id', status: 400, method: 'GET', url: '/pay/%00' },
      { name: 'NUL in the query', status: 400, method: 'GET', url: `/pay/${linkId}?paid=%00` },
      { name: 'simulate as text/plain', status: 415, method: 'POST', url: `/pay/${ref}/simulate`, type: 'text/plain', payload: 'pay please' },
      { name: 'simulate with broken JSON', status: 400, method: 'POST', url: `/pay/${ref}/simulate`, type: 'application/json', payload: '{"amount": ' },
      { name: 'a 5,000-character form field', status: 413, method: 'POST', url: `/pay/${linkId}/simulate`, type: form, payload: `amount=1&customer_email=${'a'.repeat(5000)}` },
      { name: 'customer_email=%00', status: 400, method: 'POST', url: `/pay/${linkId}/simulate`, type: form, payload: 'amount=1&customer_email=%00' },
    ];
    const before = errorLines().length;
    for (const c of cases) {
      const res = await api.app.inject({
        method: c.method,
        url: c.url,
        remoteAddress,
        headers: c.type ? { 'content-type': c.type } : {},
        ...(c.payload !== undefined ? { payload: c.payload } : {}),
      });
      expect([c.name, res.statusCode, res.headers['content-type']]).toEqual([c.name, c.status, 'text/html; charset=utf-8']);
      expect(res.body).toMatch(/^<!DOCTYPE html>/);
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    }
    expect(errorLines().slice(before)).toEqual([]);
    expect(lines.filter((l) => l.msg === 'payment page refused the request').length).toBeGreaterThanOrEqual(cases.length - 1);
    // Nothing was paid or recorded by any of them.
    const { rows } = await api.pool.query('select count(*)::int as n from payment_link_payments where payment_link_id = $1', [linkId]);
    expect(rows[0].n).toBe(0);
  });

  it(`/pay is rate limited per address (RATE_LIMIT_MAX per window): 429 as a page with Retry-After; another address is served`, async () => {
    const linkId = await emailLink();
    const flooder = freshAddress();
    const statuses: number[] = [];
    for (let i = 0; i < RATE_LIMIT_MAX + 5; i++) statuses.push((await api.app.inject({ method: 'GET', url: `/pay/${linkId}`, remoteAddress: flooder })).statusCode);
    expect(statuses.filter((st) => st === 200)).toHaveLength(RATE_LIMIT_MAX);
    expect(statuses.slice(RATE_LIMIT_MAX)).toEqual([429, 429, 429, 429, 429]);
    const limited = await api.app.inject({ method: 'GET', url: `/pay/${linkId}`, remoteAddress: flooder, headers: { 'accept-language': 'de' } });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.body).toContain('Zu viele Anfragen von Ihrer Adresse.');
    expect((await api.app.inject({ method: 'GET', url: `/pay/${linkId}`, remoteAddress: freshAddress() })).statusCode).toBe(200);
  });
});

describe('the sandbox simulate form', () => {
  const post = (url: string, headers: Record<string, string>, payload = '') =>
    api.app.inject({ method: 'POST', url, remoteAddress: freshAddress(), headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, payload });

  it('refuses cross-site posts (Sec-Fetch-Site: cross-site, a foreign Origin) with 403 and pays nothing', async () => {
    const ref = await sentInvoiceReference();
    const crossSite: Array<Record<string, string>> = [{ 'sec-fetch-site': 'cross-site' }, { origin: 'https://evil.example' }, { origin: 'null' }, { origin: 'https://evil.example', 'sec-fetch-site': 'same-origin' }];
    for (const headers of crossSite) {
      const res = await post(`/pay/${ref}/simulate`, headers);
      expect([headers, res.statusCode]).toEqual([headers, 403]);
      expect(res.body).toContain('This form can only be sent from its own payment page.');
    }
    const { rows } = await api.pool.query('select status from invoices where reference = $1', [ref]);
    expect(rows[0].status).toBe('open');
    // Its own page (the configured page origin, or the Host it was served from) may post.
    expect((await post(`/pay/${ref}/simulate`, { origin: 'https://pay.example.test', 'sec-fetch-site': 'same-origin' })).statusCode).toBe(303);
    const ref2 = await sentInvoiceReference();
    expect((await post(`/pay/${ref2}/simulate`, { origin: 'http://localhost:80', host: 'localhost:80' })).statusCode).toBe(303);
    // A bare POST (no body, no content type, no Origin: curl) still pays a sandbox invoice.
    const ref3 = await sentInvoiceReference();
    expect((await api.app.inject({ method: 'POST', url: `/pay/${ref3}/simulate`, remoteAddress: freshAddress() })).statusCode).toBe(303);
  });

  it('checks customer_email as the test helper does: no CRLF, at most 254 characters, an address', async () => {
    const linkId = await emailLink();
    for (const email of ['victim@example.test\r\nBcc: all@example.test', `${'a'.repeat(250)}@example.test`, 'not an address', 'a@b@example.test']) {
      const res = await post(`/pay/${linkId}/simulate`, {}, new URLSearchParams({ amount: '2', customer_email: email }).toString());
      expect([email, res.statusCode]).toEqual([email, 400]);
      expect(res.body).toContain('customer_email');
    }
    const { rows } = await api.pool.query('select count(*)::int as n from payment_link_payments where payment_link_id = $1', [linkId]);
    expect(rows[0].n).toBe(0);
    // A good one (spaces around it are trimmed) goes through, as does none at all.
    expect((await post(`/pay/${linkId}/simulate`, {}, 'amount=2&customer_email=+buyer%40example.test+')).statusCode).toBe(303);
    expect((await post(`/pay/${linkId}/simulate`, {}, 'amount=3&customer_email=')).statusCode).toBe(303);
    const stored = await api.pool.query('select customer_email from payment_link_payments where payment_link_id = $1 order by amount', [linkId]);
    expect(stored.rows).toEqual([{ customer_email: 'buyer@example.test' }, { customer_email: null }]);
  });
});
