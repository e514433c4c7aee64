// Adversarial bodies: deeply nested JSON, bodies on routes that take none, JSON of the wrong
// type, huge numbers, duplicate query parameters. Every one must be a 4xx in the error envelope
// naming what was wrong (never a 500), and must leave the object as it was.
import { describe, expect, it } from 'vitest';
import { request, useApiFixture, type ApiResponse, type HttpMethod, type JsonBody } from '../helpers/http.js';

const { fx, keys, call } = useApiFixture({ overrides: { RATE_LIMIT_MAX: '1000000' }, otherMerchant: false });

const TYPE_OF_STATUS: Record<number, string> = { 400: 'invalid_request_error', 404: 'invalid_request_error', 409: 'invalid_request_error', 413: 'invalid_request_error', 415: 'invalid_request_error' };

function send(method: HttpMethod, url: string, payload: string, headers: Record<string, string> = {}): Promise<ApiResponse> {
  return request(fx.api.app, method, url, { headers: { 'api-key': keys.sandbox, 'content-type': 'application/json', ...headers }, payload, lenientJson: true });
}
/** A 4xx in the envelope, its type matching its status; optionally this status and code. */
function expectRefusal(res: ApiResponse, status?: number, code?: string): void {
  const where = `${res.status} ${res.raw.slice(0, 200)}`;
  expect(res.status, where).toBeGreaterThanOrEqual(400);
  expect(res.status, where).toBeLessThan(500);
  expect(Object.keys(res.body ?? {}), where).toEqual(['error']);
  expect(res.body.error.type, where).toBe(TYPE_OF_STATUS[res.status]);
  expect(res.body.error.message.length, where).toBeGreaterThan(0);
  if (status !== undefined) expect(res.status, where).toBe(status);
  if (code !== undefined) expect(res.body.error.code, where).toBe(code);
}
async function ok(method: HttpMethod, url: string, body?: unknown): Promise<JsonBody> {
  const res = await call(method, url, keys.sandbox, body);
  expect(res.status, `${method} ${url}: ${res.raw}`).toBe(200);
  return res.body.data;
}
const count = async (table: string) => (await fx.api.pool.query(`select count(*)::int as n from ${table}`)).rows[0].n as number;
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('deeply nested JSON', () => {
  // 20,000 levels is a 40 kB body, far below BODY_LIMIT_BYTES (1 MB).
  const DEPTH = 20_000;

  it('without an Idempotency-Key: 400 on a route with a body schema, nothing written', async () => {
    const invoices = await count('invoices');
    expectRefusal(await send('POST', '/v1/invoices', `{"customer_email":"deep@example.test","memo":${nested(DEPTH)}}`), 400, 'validation_failed');
    expectRefusal(await send('POST', '/v1/credentials', `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`), 400, 'validation_failed');
    expect(await count('invoices')).toBe(invoices);
  });

  it('with an Idempotency-Key: a 400 naming the body, never a 500, on every POST (the key fingerprint recurses over the body before validation)', async () => {
    const draft = await ok('POST', '/v1/invoices', { customer_email: 'deep@example.test', amount: '2' });
    const before = { invoices: await count('invoices'), credentials: await count('credentials') };
    const cases: [string, string][] = [
      ['/v1/invoices', `{"customer_email":"deep@example.test","memo":${nested(DEPTH)}}`],
      ['/v1/credentials', `{"name":${nested(DEPTH)}}`],
      ['/v1/payment-links', `{"name":"x","metadata":${nested(DEPTH)}}`],
      [`/v1/invoices/${draft.id}/send`, `{"x":${nested(DEPTH)}}`],
    ];
    const answers: string[] = [];
    for (const [url, payload] of cases) {
      const res = await send('POST', url, payload, { 'idempotency-key': `deep-${url}` });
      answers.push(`${url.replace(draft.id, '{id}')} -> ${res.status} ${res.body?.error?.type}`);
    }
    expect(answers).toEqual(cases.map(([url]) => `${url.replace(draft.id, '{id}')} -> 400 invalid_request_error`));
    expect({ invoices: await count('invoices'), credentials: await count('credentials') }).toEqual({ invoices: before.invoices, credentials: before.credentials });
    expect((await ok('GET', `/v1/invoices/${draft.id}`)).status).toBe('draft');
  });
});

describe('a body on a route that takes none', () => {
  // docs/api.md (Lists): "an unknown one is a 400 validation_failed, like an unknown body field";
  // src/http/app.ts: "a misspelt field is a 400, not a no-op". Spec 4.3: send takes no body.
  // An empty body or {} stays fine (clients send one on POST /send).
  it('POST /send with an unknown field is 400 validation_failed and the invoice stays a draft', async () => {
    const draft = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '2' });
    expectRefusal(await send('POST', `/v1/invoices/${draft.id}/send`, '{"send_email":false}'), 400, 'validation_failed');
    expect((await ok('GET', `/v1/invoices/${draft.id}`)).status).toBe('draft');
    expect(await count(`deliveries where invoice_id = '${draft.id}'`)).toBe(0);
  });

  it('DELETE /v1/invoices/{id} with {"dry_run": true} is 400 and deletes nothing', async () => {
    const draft = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '2' });
    expectRefusal(await send('DELETE', `/v1/invoices/${draft.id}`, '{"dry_run":true}'), 400, 'validation_failed');
    expect((await call('GET', `/v1/invoices/${draft.id}`, keys.sandbox)).status).toBe(200);
  });

  it('POST /v1/invoices/{id}/void with an unknown field is 400 and the invoice stays open', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '2' });
    await ok('POST', `/v1/invoices/${inv.id}/send`);
    expectRefusal(await send('POST', `/v1/invoices/${inv.id}/void`, '{"reason":"duplicate"}'), 400, 'validation_failed');
    expect((await ok('GET', `/v1/invoices/${inv.id}`)).status).toBe('open');
  });

  it('the sandbox pay helper with {"amount": "1"} is 400, not a payment in full of a 10 invoice', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '10' });
    await ok('POST', `/v1/invoices/${inv.id}/send`);
    expectRefusal(await send('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, '{"amount":"1"}'), 400, 'validation_failed');
    expect(await ok('GET', `/v1/invoices/${inv.id}`)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
  });

  it('an empty body and {} are still accepted on those routes', async () => {
    const a = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '2' });
    expect((await send('POST', `/v1/invoices/${a.id}/send`, '{}')).status).toBe(200);
    expect((await send('POST', `/v1/invoices/${a.id}/void`, '')).status).toBe(200);
    const b = await ok('POST', '/v1/invoices', { customer_email: 'nobody@example.test', amount: '2' });
    expect((await send('DELETE', `/v1/invoices/${b.id}`, '{}')).status).toBe(200);
  });
});

describe('JSON that parses to the wrong thing', () => {
  it('bodies that are not objects, numbers out of range, prototype keys: 400, the draft unchanged', async () => {
    const draft = await ok('POST', '/v1/invoices', { customer_email: 'types@example.test', amount: '7', memo: 'kept' });
    const url = `/v1/invoices/${draft.id}`;
    for (const payload of ['[]', 'null', '"memo"', '5', 'true', '']) expectRefusal(await send('PATCH', url, payload), 400, 'validation_failed');
    expectRefusal(await send('PATCH', url, '{"amount": 1e400}'), 400, 'validation_failed'); // Infinity as a number
    expectRefusal(await send('PATCH', url, '{"amount": "1e400"}'), 400, 'amount_invalid');
    expectRefusal(await send('PATCH', url, '{"amount": "NaN"}'), 400, 'amount_invalid');
    expectRefusal(await send('PATCH', url, '{"amount": "Infinity"}'), 400, 'amount_invalid');
    expectRefusal(await send('PATCH', url, '{"amount": "0x10"}'), 400, 'amount_invalid');
    expectRefusal(await send('PATCH', url, '{"amount": "1_000"}'), 400, 'amount_invalid');
    expectRefusal(await send('PATCH', url, '{"amount": "\u0661\u0662"}'), 400, 'amount_invalid'); // Arabic-Indic digits
    expectRefusal(await send('PATCH', url, '{"amount": "7.0000001"}'), 400, 'amount_too_precise');
    expectRefusal(await send('PATCH', url, '{"line_items":[{"description":"x","quantity":1e400,"unit_amount":"1"}]}'), 400, 'validation_failed');
    expectRefusal(await send('PATCH', url, '{"line_items":[{"description":"x","quantity":1.5,"unit_amount":"1"}]}'), 400, 'validation_failed');
    expectRefusal(await send('PATCH', url, '{"__proto__":{"memo":"polluted"}}'), 400);
    expectRefusal(await send('PATCH', url, '{"constructor":{"prototype":{"memo":"polluted"}}}'), 400);
    expect(({} as JsonBody).memo).toBeUndefined();
    const { rows } = await fx.api.pool.query('select amount::text as amount, memo from invoices where id = $1', [draft.id]);
    expect(rows[0]).toEqual({ amount: '7', memo: 'kept' });
  });

  it('duplicate query parameters are 400 validation_failed naming the parameter, on every list', async () => {
    for (const url of [
      '/v1/invoices?limit=1&limit=2',
      '/v1/invoices?status=draft&status=open',
      '/v1/invoices?customer_email=a@example.test&customer_email=b@example.test',
      '/v1/products?starting_after=prod_a&starting_after=prod_b',
      '/v1/credentials?limit=5&limit=5',
      '/v1/events?type=invoice.created&type=invoice.sent',
      '/v1/subscriptions?status=active&status=canceled',
      '/v1/payments?unmatched=true&unmatched=false',
    ]) {
      const res = await request(fx.api.app, 'GET', url, { headers: { 'api-key': keys.sandbox } });
      expectRefusal(res, 400, 'validation_failed');
      const param = new URL(`http://x${url}`).searchParams.keys().next().value as string;
      expect(res.body.error.message, url).toBe(`query parameter ${param} is given more than once`);
    }
    // A negative page size is out of range, not "not an integer".
    const negative = await request(fx.api.app, 'GET', '/v1/invoices?limit=-1', { headers: { 'api-key': keys.sandbox } });
    expectRefusal(negative, 400, 'validation_failed');
    expect(negative.body.error.message).toBe('query parameter limit must be at least 1');
  });
});
