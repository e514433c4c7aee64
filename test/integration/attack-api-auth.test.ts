// Adversarial authentication: a revoked or made-up key on every route, with good and with bad
// input; keys sent twice over a real socket; a revoked key retrying an idempotent POST.
// Spec section 5, rule 1: no key, a revoked key, or a key that does not exist is a 401.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type HttpMethod, type JsonBody } from '../helpers/http.js';

const { fx, keys, other, call } = useApiFixture({ overrides: { RATE_LIMIT_MAX: '1000000', AUTH_FAILURE_LIMIT: '1000000' } });

let ids: Record<string, string>;
let revoked: string;
const unknownKey = `sp_sandbox_${'Q'.repeat(40)}`;

async function ok(method: HttpMethod, url: string, body?: unknown, key = keys.sandbox): Promise<JsonBody> {
  const res = await call(method, url, key, body);
  expect(res.status, `${method} ${url}: ${res.raw}`).toBe(200);
  return res.body.data;
}

beforeAll(async () => {
  const invoice = await ok('POST', '/v1/invoices', { customer_email: 'auth@example.test', amount: '5' });
  const open = await ok('POST', '/v1/invoices', { customer_email: 'auth@example.test', amount: '5' });
  await ok('POST', `/v1/invoices/${open.id}/send`);
  const link = await ok('POST', '/v1/payment-links', { name: 'auth', min_amount: '1' });
  const product = await ok('POST', '/v1/products', { name: 'auth', prices: [{ amount: '1', cadence: 'monthly' }] });
  const endpoint = await ok('POST', '/v1/webhook_endpoints', { url: 'https://93.184.215.14/auth', enabled_events: ['*'] });
  const events = (await call('GET', '/v1/events?limit=1', keys.sandbox)).body.data as unknown as JsonBody[];
  const victim = await ok('POST', '/v1/credentials', { name: 'to be revoked' });
  await ok('DELETE', `/v1/credentials/${victim.id}`);
  revoked = victim.secret;
  ids = { invoice: invoice.id, open: open.id, link: link.id, product: product.id, endpoint: endpoint.id, event: events[0].id, credential: victim.id };
});

/** Every /v1 route, with a request that a valid full key would get a 2xx or a domain 4xx for. */
function routes(): { method: HttpMethod; url: string; body?: unknown }[] {
  return [
    { method: 'GET', url: '/v1/account' },
    { method: 'PATCH', url: '/v1/account', body: { settlement_address: `0x${'1'.repeat(40)}` } },
    { method: 'GET', url: '/v1/credentials' },
    { method: 'POST', url: '/v1/credentials', body: { name: 'x' } },
    { method: 'DELETE', url: `/v1/credentials/${ids.credential}` },
    { method: 'GET', url: '/v1/events' },
    { method: 'GET', url: `/v1/events/${ids.event}` },
    { method: 'GET', url: '/v1/invoices' },
    { method: 'POST', url: '/v1/invoices', body: { customer_email: 'x@example.test', amount: '1' } },
    { method: 'GET', url: `/v1/invoices/${ids.invoice}` },
    { method: 'PATCH', url: `/v1/invoices/${ids.invoice}`, body: { memo: 'revoked wrote this' } },
    { method: 'DELETE', url: `/v1/invoices/${ids.invoice}` },
    { method: 'GET', url: `/v1/invoices/${ids.invoice}/lines` },
    { method: 'GET', url: `/v1/invoices/${ids.open}/payments` },
    { method: 'GET', url: `/v1/invoices/${ids.open}/pdf` },
    { method: 'GET', url: `/v1/invoices/${ids.open}/reminders` },
    { method: 'POST', url: `/v1/invoices/${ids.open}/reminders`, body: { enabled: false } },
    { method: 'POST', url: `/v1/invoices/${ids.invoice}/send` },
    { method: 'POST', url: `/v1/invoices/${ids.open}/void` },
    { method: 'GET', url: '/v1/payment-links' },
    { method: 'POST', url: '/v1/payment-links', body: { name: 'x' } },
    { method: 'GET', url: `/v1/payment-links/${ids.link}` },
    { method: 'PATCH', url: `/v1/payment-links/${ids.link}`, body: { status: 'inactive' } },
    { method: 'DELETE', url: `/v1/payment-links/${ids.link}` },
    { method: 'GET', url: '/v1/payments' },
    { method: 'GET', url: '/v1/payments/pay_x' },
    { method: 'POST', url: '/v1/payments/pay_x/apply', body: { invoice_id: ids.open } },
    { method: 'GET', url: '/v1/products' },
    { method: 'POST', url: '/v1/products', body: { name: 'x' } },
    { method: 'GET', url: `/v1/products/${ids.product}` },
    { method: 'PATCH', url: `/v1/products/${ids.product}`, body: { active: false } },
    { method: 'DELETE', url: `/v1/products/${ids.product}` },
    { method: 'GET', url: '/v1/subscriptions' },
    { method: 'GET', url: '/v1/subscriptions/sub_x' },
    { method: 'POST', url: '/v1/subscriptions/sub_x/cancel' },
    { method: 'GET', url: '/v1/subscriptions/sub_x/invoices' },
    { method: 'POST', url: `/v1/test_helpers/invoices/${ids.open}/pay` },
    { method: 'POST', url: `/v1/test_helpers/payment-links/${ids.link}/payments`, body: { amount: '2' } },
    { method: 'GET', url: '/v1/webhook_endpoints' },
    { method: 'POST', url: '/v1/webhook_endpoints', body: { url: 'https://93.184.215.14/other', enabled_events: ['*'] } },
    { method: 'GET', url: `/v1/webhook_endpoints/${ids.endpoint}` },
    { method: 'PATCH', url: `/v1/webhook_endpoints/${ids.endpoint}`, body: { description: 'x' } },
    { method: 'DELETE', url: `/v1/webhook_endpoints/${ids.endpoint}` },
    { method: 'GET', url: `/v1/webhook_endpoints/${ids.endpoint}/deliveries` },
    { method: 'POST', url: `/v1/webhook_endpoints/${ids.endpoint}/rotate_secret` },
  ];
}

/** Everything a request could have changed, to compare before and after. */
async function snapshot(): Promise<unknown> {
  const { rows } = await fx.api.pool.query(
    `select (select json_agg(json_build_object('id', id, 'status', status, 'memo', memo, 'reminders', reminders_enabled) order by id) from invoices) as invoices,
       (select json_agg(json_build_object('id', id, 'status', status) order by id) from payment_links) as links,
       (select json_agg(json_build_object('id', id, 'active', active) order by id) from products) as products,
       (select count(*) from credentials) as credentials,
       (select json_agg(json_build_object('id', id, 'secret', secret, 'description', description) order by id) from webhook_endpoints) as endpoints,
       (select count(*) from events) as events`,
  );
  return rows[0];
}

describe('a revoked key', () => {
  it('is 401 api_key_revoked on every /v1 route, and changes nothing', async () => {
    const before = await snapshot();
    for (const r of routes()) {
      for (const header of ['api-key', 'x-api-key']) {
        const res = await call(r.method, r.url, { [header]: revoked }, r.body);
        expect({ route: `${r.method} ${r.url}`, status: res.status, code: res.body?.error?.code }).toEqual({ route: `${r.method} ${r.url}`, status: 401, code: 'api_key_revoked' });
      }
    }
    expect(await snapshot()).toEqual(before);
  });

  it('retrying an idempotent POST it made before its revocation gets 401, not the stored response', async () => {
    const key = await ok('POST', '/v1/credentials', { name: 'idem then revoked' });
    const headers = { 'api-key': key.secret, 'idempotency-key': 'made-before-revocation' };
    const first = await call('POST', '/v1/invoices', headers, { customer_email: 'idem@example.test', amount: '1' });
    expect(first.status).toBe(200);
    await ok('DELETE', `/v1/credentials/${key.id}`);
    const retry = await call('POST', '/v1/invoices', headers, { customer_email: 'idem@example.test', amount: '1' });
    expectError(retry, 401, 'authentication_error', 'api_key_revoked');
    expect(retry.body.data).toBeUndefined();
  });
});

describe('authentication comes before validation', () => {
  // A request that is also malformed (an unknown query parameter, an over-long id, a NUL in the
  // path) must still be refused for its key first: the spec promises 401 for a revoked or unknown
  // key, and a caller must not learn anything about the route's validation without a valid key.
  it('a revoked or unknown key with a malformed request is 401 on every route (GET /v1/invoices/{id}, which authenticates in its own query, answered 400)', async () => {
    const wrong: string[] = [];
    for (const [name, key] of [['revoked', revoked], ['unknown', unknownKey]] as const) {
      for (const r of routes()) {
        for (const mangle of ['?bogus=1', 'long-id', 'nul'] as const) {
          let url: string;
          if (mangle === '?bogus=1') url = `${r.url}?bogus=1`;
          else if (!/\/(inv|plink|prod|we|evt|cred)_[^/]+/.test(r.url)) continue;
          else url = r.url.replace(/\/(inv|plink|prod|we|evt|cred)_[^/]+/, mangle === 'long-id' ? `/${'x'.repeat(80)}` : '/a%00b');
          const res = await call(r.method, url, key, r.body);
          const code = name === 'revoked' ? 'api_key_revoked' : 'api_key_invalid';
          if (res.status !== 401 || res.body?.error?.code !== code) wrong.push(`${name} ${r.method} ${url.slice(0, 60)} -> ${res.status} ${res.body?.error?.code}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('without any key, the same malformed requests are 401 api_key_missing', async () => {
    for (const url of [`/v1/invoices/${ids.invoice}?bogus=1`, `/v1/invoices/${'x'.repeat(80)}`, '/v1/invoices/a%00b']) {
      expectError(await call('GET', url, null), 401, 'authentication_error', 'api_key_missing');
    }
  });
});

describe('key headers over a real socket', () => {
  let port: number;
  beforeAll(async () => {
    await fx.api.app.listen({ port: 0, host: '127.0.0.1' });
    port = (fx.api.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    // fx.close() closes the app (and with it this listener).
  });

  /** One raw HTTP/1.1 request with exactly these header lines; the status and body of the answer. */
  function rawRequest(lines: string[]): Promise<{ status: number; body: JsonBody }> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk) => (data += chunk));
      socket.on('error', reject);
      socket.on('end', () => {
        const [head, ...rest] = data.split('\r\n\r\n');
        resolve({ status: Number(head.split(' ')[1]), body: JSON.parse(rest.join('\r\n\r\n') || 'null') });
      });
      socket.write(`${lines.join('\r\n')}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    });
  }

  it('two Api-Key headers are refused with 401, whichever keys they carry; never read as either one', async () => {
    const path = `GET /v1/invoices/${ids.invoice} HTTP/1.1`;
    for (const pair of [[keys.sandbox, other.sandbox], [other.sandbox, keys.sandbox], [keys.sandbox, keys.sandbox], [revoked, keys.sandbox]]) {
      const res = await rawRequest([path, `Api-Key: ${pair[0]}`, `Api-Key: ${pair[1]}`]);
      expect(res.status, pair.join(' ')).toBe(401);
      expect(res.body.error.type).toBe('authentication_error');
    }
    const single = await rawRequest([path, `Api-Key: ${keys.sandbox}`]);
    expect([single.status, single.body.data.id]).toEqual([200, ids.invoice]);
  });

  it('Api-Key wins over X-API-Key: another account\'s key in Api-Key never reads this account\'s invoice', async () => {
    const res = await rawRequest([`GET /v1/invoices/${ids.invoice} HTTP/1.1`, `Api-Key: ${other.sandbox}`, `X-API-Key: ${keys.sandbox}`]);
    expect([res.status, res.body.error.code]).toEqual([404, 'resource_missing']);
    const revokedFirst = await rawRequest([`GET /v1/invoices/${ids.invoice} HTTP/1.1`, `Api-Key: ${revoked}`, `X-API-Key: ${keys.sandbox}`]);
    expect([revokedFirst.status, revokedFirst.body.error.code]).toEqual([401, 'api_key_revoked']);
  });
});
