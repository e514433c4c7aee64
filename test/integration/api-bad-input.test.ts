// Bad input of every kind: unknown routes, broken JSON, wrong content types, oversized bodies,
// schema violations, bad amounts, unicode, SQL-ish strings, NUL characters, absurd ids. Every
// answer is the error envelope with a status that matches its type, and never a 5xx.
import { beforeAll, describe, expect, it } from 'vitest';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { request, useApiFixture, type ApiResponse, type HttpMethod as Method } from '../helpers/http.js';

const TYPE_OF_STATUS: Record<number, string> = {
  400: 'invalid_request_error',
  404: 'invalid_request_error',
  409: 'invalid_request_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
};

// The sweep sends a few thousand requests with one key: lift the per-key rate limit, so each
// of them reaches validation and the handlers instead of stopping at 429.
const { fx, keys } = useApiFixture({ overrides: { RATE_LIMIT_MAX: '1000000' }, otherMerchant: false });
let key: string;
let ids: { invoice: string; sentInvoice: string; link: string; product: string; price: string };

/** A request with the file's key unless told otherwise; a response that is not JSON has a null body. */
function send(
  method: Method,
  url: string,
  opts: { body?: unknown; payload?: string | Buffer; headers?: Record<string, string>; key?: string | null; app?: ApiFixture } = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...(opts.key === null ? {} : { 'api-key': opts.key ?? key }), ...opts.headers };
  return request((opts.app ?? fx).api.app, method, url, { headers, body: opts.body, payload: opts.payload, lenientJson: true });
}
/** The envelope, with a status that matches its type; optionally the exact status and code. */
function expectEnvelope(res: ApiResponse, status?: number, code?: string): void {
  const where = `${res.status} ${res.raw.slice(0, 300)}`;
  expect(res.status, where).toBeLessThan(500);
  expect(res.status, where).toBeGreaterThanOrEqual(400);
  expect(res.body, where).not.toBeNull();
  expect(Object.keys(res.body), where).toEqual(['error']);
  const e = res.body.error;
  expect(e.type, where).toBe(TYPE_OF_STATUS[res.status]);
  expect(typeof e.code, where).toBe('string');
  expect(typeof e.message, where).toBe('string');
  expect(e.message.length, where).toBeGreaterThan(0);
  if (status !== undefined) expect(res.status, where).toBe(status);
  if (code !== undefined) expect(e.code, where).toBe(code);
}
async function memoOf(invoiceId: string): Promise<string | null> {
  const { rows } = await fx.api.pool.query('select memo from invoices where id = $1', [invoiceId]);
  return rows[0].memo;
}

beforeAll(async () => {
  key = keys.sandbox;
  const ok = async (method: Method, url: string, body?: unknown) => {
    const res = await send(method, url, { body });
    expect(res.status, res.raw).toBe(200);
    return res.body.data;
  };
  const invoice = await ok('POST', '/v1/invoices', { customer_email: 'payer@example.test', amount: '10' });
  const sentInvoice = await ok('POST', '/v1/invoices', { customer_email: 'payer@example.test', amount: '10' });
  await ok('POST', `/v1/invoices/${sentInvoice.id}/send`);
  const link = await ok('POST', '/v1/payment-links', { name: 'Tips', min_amount: '1' });
  const product = await ok('POST', '/v1/products', { name: 'Plan', prices: [{ amount: '5', cadence: 'monthly' }] });
  ids = { invoice: invoice.id, sentInvoice: sentInvoice.id, link: link.id, product: product.id, price: product.prices[0].id };
});

describe('routing', () => {
  it('unknown routes and methods are 404 route_not_found, with or without a key', async () => {
    const cases: [Method, string][] = [
      ['GET', '/v1/nope'],
      ['GET', '/v2/invoices/x'],
      ['GET', '/'],
      ['GET', '/v1'],
      ['PUT', '/v1/invoices'],
      ['PUT', '/v1/invoices/inv_x'],
      ['DELETE', '/v1/subscriptions/sub_x'],
      ['OPTIONS', '/v1/payment-links'],
      ['POST', '/v1/subscriptions/sub_x'],
      ['GET', '/v1/invoices/inv_x/nope'],
    ];
    for (const [method, url] of cases) {
      for (const k of [key, null]) {
        const res = await send(method, url, { key: k });
        expectEnvelope(res, 404, 'route_not_found');
      }
    }
  });
});

describe('bodies', () => {
  it('malformed JSON is 400 invalid_json', async () => {
    for (const payload of ['{', '{"amount": "1",}', "{'amount': '1'}", 'amount=1', '{"a":1}{"b":2}', '\u00ff\u00fe', 'undefined', '{"__proto__": {"x": 1}}']) {
      const res = await send('PATCH', `/v1/invoices/${ids.invoice}`, { payload, headers: { 'content-type': 'application/json' } });
      expectEnvelope(res, 400, 'invalid_json');
    }
  });

  // Read as UTF-8 with replacement, these bytes were stored as U+FFFD: 200, and "caf\uFFFD" in the row.
  it('a body that is not valid UTF-8 is 400 invalid_json, and nothing is stored; valid UTF-8 passes', async () => {
    const memo = async () => (await fx.api.pool.query<{ memo: string | null }>('select memo from invoices where id = $1', [ids.invoice])).rows[0].memo;
    const before = await memo();
    const bodies: [Buffer, string][] = [
      [Buffer.concat([Buffer.from('{"memo":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]), 'application/json; charset=iso-8859-1'],
      [Buffer.concat([Buffer.from('{"memo":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), 'application/json'],
      [Buffer.concat([Buffer.from('{"memo":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]), 'application/json'], // overlong "/"
      [Buffer.concat([Buffer.from('{"memo":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]), 'application/json'], // an encoded surrogate
    ];
    for (const [payload, type] of bodies) {
      const res = await send('PATCH', `/v1/invoices/${ids.invoice}`, { payload, headers: { 'content-type': type } });
      expectEnvelope(res, 400, 'invalid_json');
      expect(res.body.error.message).toContain('UTF-8');
    }
    expect(await memo()).toBe(before);
    const ok = await send('PATCH', `/v1/invoices/${ids.invoice}`, { payload: Buffer.from('{"memo":"café 中文 😀"}'), headers: { 'content-type': 'application/json' } });
    expect(ok.status, ok.raw).toBe(200);
    expect(await memo()).toBe('café 中文 😀');
  });

  it('a body that is not JSON is 415', async () => {
    const types = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/jsonx', 'text/json'];
    for (const type of types) {
      const res = await send('POST', '/v1/invoices', { payload: '{"customer_email":"a@example.test"}', headers: { 'content-type': type } });
      expectEnvelope(res, 415, 'unsupported_media_type');
    }
    // No content type at all, with a body.
    const res = await send('POST', '/v1/invoices', { payload: Buffer.from('{"customer_email":"a@example.test"}'), headers: { 'content-type': '' } });
    expectEnvelope(res, 415, 'unsupported_media_type');
    expect((await fx.api.pool.query('select count(*)::int as n from invoices')).rows[0].n).toBe(2);
  });

  it('JSON with a charset parameter is accepted', async () => {
    const res = await send('PATCH', `/v1/invoices/${ids.invoice}`, { payload: '{"memo":"charset"}', headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(res.status).toBe(200);
  });

  it('a body over the limit is 413 body_too_large', async () => {
    const small = await startApiFixture({ BODY_LIMIT_BYTES: '2048' });
    try {
      const k = small.merchant.keys.sandbox;
      const inv = await small.api.app.inject({ method: 'POST', url: '/v1/invoices', headers: { 'api-key': k }, payload: { customer_email: 'a@example.test', amount: '1' } });
      const id = inv.json().data.id;
      const under = await send('PATCH', `/v1/invoices/${id}`, { app: small, key: k, body: { memo: 'm'.repeat(1900) } });
      expect(under.status, under.raw).toBe(200);
      for (const body of [{ memo: 'm'.repeat(2100) }, { memo: 'é'.repeat(1100) }, { line_items: Array.from({ length: 100 }, () => ({ description: 'x', quantity: 1, unit_amount: '1' })) }]) {
        const res = await send('PATCH', `/v1/invoices/${id}`, { app: small, key: k, body });
        expectEnvelope(res, 413, 'body_too_large');
      }
      expectEnvelope(await send('POST', '/v1/payment-links', { app: small, key: k, payload: `{"name":"${'x'.repeat(5000)}"}`, headers: { 'content-type': 'application/json' } }), 413, 'body_too_large');
      const { rows } = await small.api.pool.query('select memo from invoices where id = $1', [id]);
      expect(rows[0].memo).toBe('m'.repeat(1900));
    } finally {
      await small.close();
    }
    // The default limit (1 MiB) holds too.
    expectEnvelope(await send('POST', '/v1/invoices', { payload: `{"memo":"${'x'.repeat(1_100_000)}"}`, headers: { 'content-type': 'application/json' } }), 413, 'body_too_large');
  });

  it('schema violations are 400 validation_failed and change nothing', async () => {
    const url = `/v1/invoices/${ids.invoice}`;
    const before = (await send('GET', url)).body.data;
    const bad: unknown[] = [
      { amount: 12.5 },
      { amount: 12 },
      { amount: null },
      { amount: ['12'] },
      { line_items: [{ description: 'x', quantity: '2', unit_amount: '1' }] },
      { line_items: [{ description: 'x', quantity: 1.5, unit_amount: '1' }] },
      { line_items: [{ description: 'x', quantity: 0, unit_amount: '1' }] },
      { line_items: [{ description: 'x', quantity: -1, unit_amount: '1' }] },
      { line_items: [{ description: 'x', quantity: 1, unit_amount: 1 }] },
      { line_items: [{ description: '', quantity: 1, unit_amount: '1' }] },
      { line_items: [{ description: 'x', quantity: 1 }] },
      { line_items: [{ description: 'x', quantity: 1, unit_amount: '1', tax: '1' }] },
      { line_items: {} },
      { amount: '1', amout: '2' },
      { status: 'paid' },
      { code: 'INV-1' },
      { metadata: { a: '1' } },
      { due_at: 'tomorrow' },
      { due_at: '2024-02-30T00:00:00Z' },
      { due_at: '2024-01-01' },
      { due_at: '0000-01-01T00:00:00Z' },
      { memo: 'x'.repeat(5001) },
      { tax_id: 7 },
      { amount: 'x'.repeat(41) },
      [],
      'string',
      42,
      null,
    ];
    for (const body of bad) {
      const res = await send('PATCH', url, { payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      expectEnvelope(res, 400, 'validation_failed');
    }
    // No body at all on PATCH.
    expectEnvelope(await send('PATCH', url), 400, 'validation_failed');
    expectEnvelope(await send('PATCH', url, { payload: '', headers: { 'content-type': 'application/json' } }), 400, 'validation_failed');
    expect((await send('GET', url)).body.data).toEqual(before);
  });

  // Each of these was refused, but with a message about something else: "the body has an
  // unexpected shape" (a nullable body), "metadata must not be empty" (for an empty key), "not
  // valid JSON" (for valid JSON with a __proto__ key), or the whole of a 900,000-character name.
  it('a refusal names the real problem', async () => {
    const message = async (res: Promise<ApiResponse>) => {
      const r = await res;
      expectEnvelope(r, 400);
      return String(r.body.error.message);
    };
    const pay = (body: unknown) => send('POST', `/v1/test_helpers/payment-links/${ids.link}/payments`, { body });
    expect(await message(pay({ customer_email: 'not-an-email' }))).toBe('customer_email must be an email address');
    expect(await message(pay({ amount: '5', bogus: 1 }))).toBe('unknown field "bogus"');
    expect(await message(pay({ amount: 1 }))).toBe('amount must be a string');
    const create = (metadata: unknown) => send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1', metadata } });
    for (const key of ['', 'k'.repeat(41)]) {
      expect(await message(create({ [key]: 'v' }))).toBe('metadata has a key that is empty or too long (keys are 1 to 40 characters)');
    }
    const long = await message(send('POST', '/v1/products', { body: { name: 'x', ['f'.repeat(900_000)]: 1 } }));
    expect(long.length).toBeLessThan(200);
    expect(long).toMatch(/^unknown field "f{100}…"$/);
    expect(await message(send('PATCH', `/v1/products/${ids.product}`, { payload: '{"metadata":{"__proto__":"v"}}', headers: { 'content-type': 'application/json' } }))).toContain('"__proto__"');
    // A byte order mark is skipped, as JSON parsers may: the same body with one says the same.
    const bom = (json: string) => send('PATCH', `/v1/products/${ids.product}`, { payload: Buffer.from(`\uFEFF${json}`), headers: { 'content-type': 'application/json' } });
    expect(await message(bom('{"metadata":{"__proto__":"v"}}'))).toContain('"__proto__"');
    expect((await bom('{"description":"with a BOM"}')).status).toBe(200);
    const repeated = await message(send('GET', `/v1/products?${'q'.repeat(500)}=1&${'q'.repeat(500)}=2`));
    expect(repeated).toBe(`query parameter ${'q'.repeat(100)}… is given more than once`);
  });

  it('metadata is bounded: string values, keys of 1..40 characters, at most 50', async () => {
    const create = (metadata: unknown) => send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1', metadata } });
    for (const metadata of [{ '': 'v' }, { ['k'.repeat(41)]: 'v' }, { k: 1 }, { k: { nested: 'x' } }, { k: 'v'.repeat(501) }, Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])), ['a']]) {
      expectEnvelope(await create(metadata), 400, 'validation_failed');
    }
    const ok = await create({ ['k'.repeat(40)]: 'v'.repeat(500), 'ключ': 'значение 🎉' });
    expect(ok.status).toBe(200);
    expect(ok.body.data.metadata).toEqual({ ['k'.repeat(40)]: 'v'.repeat(500), 'ключ': 'значение 🎉' });
  });
});

describe('amounts', () => {
  const NON_DECIMAL = ['1e5', '-1', '+1', ' 1', '1 ', '1.', '.5', 'abc', '0x10', '01', '1,5', '１', 'NaN', 'Infinity', '1/2', '', '٣'];

  it('non-decimal amounts are refused everywhere an amount is taken', async () => {
    for (const amount of NON_DECIMAL) {
      const expected = amount === '' ? 'validation_failed' : 'amount_invalid';
      expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount } }), 400, expected);
      expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { amount } }), 400, expected);
      expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { line_items: [{ description: 'x', quantity: 1, unit_amount: amount }] } }), 400, expected);
      expectEnvelope(await send('POST', '/v1/payment-links', { body: { name: 'x', max_amount: amount } }), 400, expected);
      expectEnvelope(await send('POST', '/v1/products', { body: { name: 'x', prices: [{ amount }] } }), 400, expected);
      expectEnvelope(await send('POST', `/v1/test_helpers/payment-links/${ids.link}/payments`, { body: { amount } }), 400, expected);
    }
    expect((await send('GET', `/v1/invoices/${ids.invoice}`)).body.data.amount).toBe('10');
  });

  it('over-precise amounts are amount_too_precise, per token', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ amount: '1.0000001' }, 'amount_too_precise'],
      [{ amount: '1.0000001', network: 'sepolia', currency: 'USDC' }, 'amount_too_precise'],
      [{ amount: '1.0000000000000000001', network: 'sepolia', currency: 'DAI' }, 'amount_too_precise'],
    ];
    for (const [body, code] of cases) {
      expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', ...body } }), 400, code);
    }
    expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { amount: '0.1234567' } }), 400, 'amount_too_precise');
    expectEnvelope(await send('POST', '/v1/payment-links', { body: { name: 'x', preset_amount: '5.0000005' } }), 400, 'amount_too_precise');
    const dai = await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1.0000001', network: 'sepolia', currency: 'DAI' } });
    expect(dai.status).toBe(200);
    expect(dai.body.data.amount_atomic).toBe('1000000100000000000');
  });

  it('zero and oversized amounts are refused', async () => {
    for (const amount of ['0', '0.0', '0.000000']) {
      expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount } }), 400, 'amount_not_positive');
      expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { amount } }), 400, 'amount_not_positive');
      expectEnvelope(await send('POST', '/v1/products', { body: { name: 'x', prices: [{ amount }] } }), 400, 'amount_not_positive');
    }
    expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { line_items: [{ description: 'free', quantity: 3, unit_amount: '0' }] } }), 400, 'amount_not_positive');
    expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1000000000000000' } }), 400, 'amount_too_large');
    expectEnvelope(
      await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { line_items: [{ description: 'lots', quantity: 1_000_000, unit_amount: '999999999999999' }] } }),
      400,
      'amount_too_large',
    );
    expect((await send('GET', `/v1/invoices/${ids.invoice}`)).body.data.amount).toBe('10');
  });
});

describe('strings', () => {
  const UNICODE = ['Ελληνικά: Καλημέρα', 'Кириллица: Привет, мир', 'emoji 🧾💸👩🏽‍💻🇫🇷', '中文 日本語 한국어', 'RTL עברית العربية', 'combining é vs é', '\u200b zero-width'];

  it('unicode names and memos round-trip exactly', async () => {
    for (const text of UNICODE) {
      const product = await send('POST', '/v1/products', { body: { name: text, description: text, metadata: { t: text } } });
      expect(product.status).toBe(200);
      expect(product.body.data).toMatchObject({ name: text, description: text, metadata: { t: text } });
      expect((await send('GET', `/v1/products/${product.body.data.id}`)).body.data.name).toBe(text);

      const link = await send('POST', '/v1/payment-links', { body: { name: text, confirmation_message: text } });
      expect(link.body.data).toMatchObject({ name: text, confirmation_message: text });
      expect((await send('GET', `/v1/payment-links/${link.body.data.id}`)).body.data.name).toBe(text);

      const inv = await send('POST', '/v1/invoices', { body: { customer_email: 'uni@example.test', customer_name: text, amount: '1', memo: text, footer: text } });
      expect(inv.status).toBe(200);
      const { rows } = await fx.api.pool.query(
        'select i.memo, i.footer, c.name from invoices i join customers c on c.id = i.customer_id where i.id = $1',
        [inv.body.data.id],
      );
      expect(rows[0]).toEqual({ memo: text, footer: text, name: text });
    }
  });

  it('SQL-ish strings are stored verbatim, and as ids they are simply not found', async () => {
    const sqlish = ["'; drop table invoices; --", 'Robert\'); DROP TABLE products;--', '" or 1=1 --', '%_\\', '$1', '${1}'];
    for (const text of sqlish) {
      const upd = await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { memo: text, tax_id: text } });
      expect(upd.status).toBe(200);
      expect(await memoOf(ids.invoice)).toBe(text);
      const product = await send('POST', '/v1/products', { body: { name: text } });
      expect(product.body.data.name).toBe(text);
      const link = await send('PATCH', `/v1/payment-links/${ids.link}`, { body: { name: text } });
      expect(link.body.data.name).toBe(text);

      const path = encodeURIComponent(text);
      for (const url of [`/v1/invoices/${path}`, `/v1/payment-links/${path}`, `/v1/products/${path}`, `/v1/subscriptions/${path}`]) {
        expectEnvelope(await send('GET', url), 404, 'resource_missing');
      }
      expectEnvelope(await send('PATCH', `/v1/invoices/${path}`, { body: { memo: 'x' } }), 404, 'resource_missing');
      expectEnvelope(await send('DELETE', `/v1/credentials/${path}`), 404, 'resource_missing');
    }
    const { rows } = await fx.api.pool.query(`select to_regclass('invoices') as i, to_regclass('products') as p`);
    expect(rows[0]).toEqual({ i: 'invoices', p: 'products' });
  });

  it('the NUL character is refused with 400, in bodies and in paths', async () => {
    expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { memo: 'a\u0000b' } }), 400, 'validation_failed');
    expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1', metadata: { k: '\u0000' } } }), 400, 'validation_failed');
    expectEnvelope(await send('POST', '/v1/invoices', { body: { customer_email: 'a@example.test', amount: '1', metadata: { 'k\u0000': 'v' } } }), 400, 'validation_failed');
    expectEnvelope(await send('POST', '/v1/products', { body: { name: '\u0000' } }), 400, 'validation_failed');
    expectEnvelope(await send('PATCH', `/v1/invoices/${ids.invoice}`, { body: { line_items: [{ description: 'x\u0000', quantity: 1, unit_amount: '10' }] } }), 400, 'validation_failed');
    expectEnvelope(await send('GET', '/v1/invoices/inv%00x'), 400, 'validation_failed');
    expectEnvelope(await send('DELETE', '/v1/payment-links/%00'), 400, 'validation_failed');
    expect(await memoOf(ids.invoice)).not.toContain('\u0000');
  });

  it('very long or undecodable ids are refused or not found, never a 5xx', async () => {
    for (const length of [64, 65, 100, 101, 1000, 20_000]) {
      const id = 'x'.repeat(length);
      for (const url of [`/v1/invoices/${id}`, `/v1/invoices/${id}/reminders`, `/v1/payment-links/${id}`, `/v1/products/${id}`, `/v1/subscriptions/${id}`]) {
        const res = await send('GET', url);
        expectEnvelope(res);
        expect([400, 404], url.slice(0, 40)).toContain(res.status);
      }
      expectEnvelope(await send('DELETE', `/v1/credentials/${id}`));
      expectEnvelope(await send('POST', `/v1/invoices/${id}/send`));
    }
    for (const url of ['/v1/invoices/%ZZ', '/v1/invoices/%E0%A4%A', '/v1/payment-links/%FF', '/v1/products/%']) {
      expectEnvelope(await send('GET', url), 400, 'validation_failed');
      // Without a key, or with a malformed one, the key's 401 comes first, as on a well-formed path.
      expectEnvelope(await send('GET', url, { key: null }), 401, 'api_key_missing');
      expectEnvelope(await send('GET', url, { key: 'sk_test_nope' }), 401, 'api_key_invalid');
    }
  });
});

describe('never a 5xx', () => {
  it('survives a sweep of bad inputs over every endpoint', async () => {
    const BAD_VALUES: unknown[] = [
      null, true, 0, -1, 12.5, 1e308, '', ' ', 'x'.repeat(10_000), '\u0000', '\ud800', '💥'.repeat(300), "'; drop table invoices; --",
      [], [null], {}, { $gt: '' }, { __proto__: { polluted: 'yes' } }, '1e5', '-1', '0', '0.0000001', '999999999999999999999999',
      '2024-13-01T00:00:00Z', '0000-01-01T00:00:00Z', 'javascript:alert(1)',
    ];
    // Each field gets each bad value alone, and inside an otherwise valid body (to reach the handler).
    const endpoints: { method: Method; url: string; base: Record<string, unknown>; fields: string[] }[] = [
      { method: 'POST', url: '/v1/invoices', base: { customer_email: 'a@example.test', amount: '1' }, fields: ['customer_email', 'customer_name', 'customer_time_zone', 'currency', 'network', 'amount', 'line_items', 'due_at', 'memo', 'metadata', 'reminders_enabled'] },
      { method: 'PATCH', url: `/v1/invoices/${ids.invoice}`, base: { amount: '10' }, fields: ['amount', 'due_at', 'memo', 'footer', 'tax_id', 'line_items'] },
      { method: 'PATCH', url: `/v1/invoices/${ids.sentInvoice}`, base: { memo: 'x' }, fields: ['amount', 'memo'] },
      { method: 'POST', url: `/v1/invoices/${ids.sentInvoice}/reminders`, base: { enabled: true }, fields: ['enabled'] },
      { method: 'POST', url: `/v1/invoices/${ids.invoice}/send`, base: {}, fields: ['anything'] },
      { method: 'POST', url: '/v1/payment-links', base: { name: 'n' }, fields: ['name', 'type', 'price_id', 'currency', 'network', 'min_amount', 'max_amount', 'preset_amount', 'max_payments', 'after_completion', 'redirect_url', 'fee_payer'] },
      { method: 'PATCH', url: `/v1/payment-links/${ids.link}`, base: { name: 'n' }, fields: ['name', 'status', 'collect_email', 'after_completion', 'confirmation_message', 'redirect_url'] },
      { method: 'POST', url: '/v1/products', base: { name: 'n', prices: [{ amount: '1' }] }, fields: ['name', 'description', 'metadata', 'prices'] },
      { method: 'PATCH', url: `/v1/products/${ids.product}`, base: { name: 'n' }, fields: ['name', 'description', 'active', 'metadata'] },
      { method: 'POST', url: '/v1/credentials', base: { name: 'n' }, fields: ['name', 'permission'] },
      { method: 'POST', url: `/v1/test_helpers/payment-links/${ids.link}/payments`, base: { amount: '2' }, fields: ['amount', 'customer_email'] },
    ];
    let count = 0;
    for (const { method, url, base, fields } of endpoints) {
      for (const field of fields) {
        for (const value of BAD_VALUES) {
          for (const body of [{ [field]: value }, { ...base, [field]: value }]) {
              const res = await send(method, url, { payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
            count++;
            expect(res.status).not.toBe(429);
            expect(res.status, `${method} ${url} ${field}=${JSON.stringify(value)?.slice(0, 40)} -> ${res.raw.slice(0, 200)}`).toBeLessThan(500);
            if (res.status >= 400) expectEnvelope(res);
          }
        }
      }
    }
    expect(count).toBe(2 * BAD_VALUES.length * endpoints.reduce((n, e) => n + e.fields.length, 0));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // The sent invoice is still as sent; the draft still has a valid amount.
    expect((await send('GET', `/v1/invoices/${ids.sentInvoice}`)).body.data).toMatchObject({ status: 'open', amount: '10' });
  }, 120_000); // ~1,900 requests: minutes on a loaded 2-core machine
});

describe('values the validator must stop before Postgres', () => {
  it('due_at with an offset, a leap second or a year Postgres cannot store is a 400', async () => {
    for (const due_at of ['2027-01-01T00:00:00+16:00', '2027-01-01T00:00:00-23:00', '2027-06-30T23:59:60Z', '0000-01-01T00:00:00Z']) {
      const res = await send('POST', '/v1/invoices', { body: { customer_email: 'due@example.test', amount: '1', due_at } });
      expectEnvelope(res, 400, 'validation_failed');
    }
    const ok = await send('POST', '/v1/invoices', { body: { customer_email: 'due@example.test', amount: '1', due_at: '2027-01-01T00:00:00+05:30' } });
    expect(ok.status).toBe(200);
  });

  it('a lone UTF-16 surrogate in metadata or a memo is a 400, not a 500', async () => {
    for (const body of [
      { customer_email: 'sur@example.test', amount: '1', metadata: { k: 'a\ud800b' } },
      { customer_email: 'sur@example.test', amount: '1', metadata: { ['\udc00']: 'v' } },
      { customer_email: 'sur@example.test', amount: '1', memo: 'x\udfffy' },
    ]) {
      expectEnvelope(await send('POST', '/v1/invoices', { body }), 400, 'validation_failed');
    }
  });

  it('an unknown query parameter is a 400, like an unknown body field', async () => {
    expectEnvelope(await send('GET', '/v1/payment-links?limit=abc'), 400, 'validation_failed');
    expectEnvelope(await send('GET', `/v1/invoices/${ids.invoice}?expand=customer`), 400, 'validation_failed');
  });

  it('the error envelope has exactly type, code and message', async () => {
    const res = await send('GET', '/v1/invoices/inv_doesnotexist');
    expect(res.status).toBe(404);
    expect(Object.keys(res.body.error).sort()).toEqual(['code', 'message', 'type']);
  });
});
