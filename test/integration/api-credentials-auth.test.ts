// Authentication and API keys: both headers, every kind of bad key, read-only keys, creating and
// revoking keys (seen at once by a second API process over the same database).
import { describe, expect, it } from 'vitest';
import { MAX_ACTIVE_API_KEYS } from '../../src/domain/api-keys.js';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { createApiRuntime } from '../../src/runtime/api-runtime.js';
import { apiClient, expectError as expectApiError, request, useApiFixture, type ApiResponse, type HttpMethod, type JsonBody } from '../helpers/http.js';

const CREDENTIAL_FIELDS = ['id', 'name', 'permission', 'environment', 'last4', 'revoked', 'revoked_at', 'created_at'].sort();

// Many requests here fail authentication on purpose: the per-address throttle (limits.test.ts) stays out of the way.
const { fx, keys, other, call } = useApiFixture({ overrides: { AUTH_FAILURE_LIMIT: '100000' } });
const as = (key: string) => ({ 'api-key': key });
const expectError = (res: ApiResponse, status: number, type: string, code: string) => expectApiError(res, status, type, code, { noData: true });
async function createKey(body: Record<string, unknown>, key = keys.sandbox): Promise<JsonBody> {
  const res = await call('POST', '/v1/credentials', as(key), body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

describe('authentication', () => {
  it('accepts the key in Api-Key and in X-API-Key', async () => {
    for (const header of ['Api-Key', 'api-key', 'X-API-Key', 'x-api-key']) {
      const res = await call('GET', '/v1/payment-links', { [header]: keys.sandbox });
      expect(res.status, header).toBe(200);
      expect(res.body).toEqual({ data: [] });
    }
    // An empty Api-Key beside a valid X-API-Key is no key beside a key (it was a 401 api_key_missing).
    expect((await call('GET', '/v1/payment-links', { 'api-key': '', 'x-api-key': keys.sandbox })).status).toBe(200);
    expectError(await call('GET', '/v1/payment-links', { 'api-key': ' ', 'x-api-key': '' }), 401, 'authentication_error', 'api_key_missing');
    // The key decides the environment: a live link is only seen with the live key, whichever header.
    const link = await call('POST', '/v1/payment-links', { 'x-api-key': keys.live }, { name: 'live link' });
    expect(link.status).toBe(200);
    expect((await call('GET', `/v1/payment-links/${link.body.data.id}`, { 'api-key': keys.live })).status).toBe(200);
    expect((await call('GET', `/v1/payment-links/${link.body.data.id}`, { 'x-api-key': keys.sandbox })).status).toBe(404);
  });

  it('refuses missing, malformed and unknown keys with 401 authentication_error', async () => {
    const wellFormedUnknown = `sp_sandbox_${'A'.repeat(40)}`;
    const cases: [Record<string, string>, string][] = [
      [{}, 'api_key_missing'],
      [{ 'api-key': '' }, 'api_key_missing'],
      [{ 'api-key': '   ' }, 'api_key_missing'],
      [{ authorization: `Bearer ${keys.sandbox}` }, 'api_key_missing'],
      [{ 'api-key': 'hello' }, 'api_key_invalid'],
      [{ 'api-key': keys.sandbox.slice(0, -1) }, 'api_key_invalid'],
      [{ 'api-key': `${keys.sandbox}x` }, 'api_key_invalid'],
      [{ 'api-key': keys.sandbox.toUpperCase() }, 'api_key_invalid'],
      [{ 'api-key': keys.sandbox.replace('sp_sandbox_', 'sp_live_') }, 'api_key_invalid'],
      [{ 'api-key': keys.live.replace('sp_live_', 'sp_sandbox_') }, 'api_key_invalid'],
      [{ 'api-key': wellFormedUnknown }, 'api_key_invalid'],
      [{ 'api-key': `sp_live_${'z'.repeat(40)}` }, 'api_key_invalid'],
      [{ 'api-key': "sp_sandbox_' or '1'='1" }, 'api_key_invalid'],
      [{ 'api-key': 'x'.repeat(5000) }, 'api_key_invalid'],
    ];
    for (const [headers, code] of cases) {
      for (const [method, url] of [['GET', '/v1/payment-links'], ['POST', '/v1/invoices'], ['DELETE', '/v1/credentials/cred_x'], ['GET', '/v1/invoices/inv_x']] as const) {
        const res = await call(method, url, headers, method === 'POST' ? { customer_email: 'a@example.test' } : undefined);
        expectError(res, 401, 'authentication_error', code);
      }
    }
    expect((await fx.api.pool.query('select count(*)::int as n from invoices')).rows[0].n).toBe(0);
  });

  it('authenticates before reading the body', async () => {
    const res = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers: { 'content-type': 'application/json' }, payload: '{not json' });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.type).toBe('authentication_error');
  });
});

describe('credentials', () => {
  it('creates a key in the environment of the calling key; its secret is shown once and works', async () => {
    const created = await createKey({ name: 'CI key' });
    expect(Object.keys(created).sort()).toEqual([...CREDENTIAL_FIELDS, 'secret'].sort());
    expect(created).toMatchObject({ name: 'CI key', permission: 'full', environment: 'sandbox', revoked: false, revoked_at: null });
    expect(created.secret).toMatch(/^sp_sandbox_[0-9A-Za-z]{40}$/);
    expect(created.last4).toBe(created.secret.slice(-4));
    const { rows } = await fx.api.pool.query('select secret_hash from credentials where id = $1', [created.id]);
    expect(rows[0].secret_hash.toString('utf8')).not.toContain(created.secret);
    expect((await call('GET', '/v1/payment-links', as(created.secret))).status).toBe(200);

    const live = await createKey({ name: 'live ro', permission: 'read_only' }, keys.live);
    expect(live).toMatchObject({ environment: 'live', permission: 'read_only' });
    expect(live.secret).toMatch(/^sp_live_/);
    expect((await call('GET', '/v1/payment-links', as(live.secret))).status).toBe(200);
    expectError(await call('POST', '/v1/payment-links', as(live.secret), { name: 'x' }), 403, 'permission_error', 'permission_denied');
  });

  it('a read-only key can neither create nor revoke keys', async () => {
    const target = await createKey({ name: 'target' });
    expectError(await call('POST', '/v1/credentials', as(keys.sandbox_read_only), { name: 'escalate', permission: 'full' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('DELETE', `/v1/credentials/${target.id}`, as(keys.sandbox_read_only)), 403, 'permission_error', 'permission_denied');
    expect((await call('GET', '/v1/payment-links', as(target.secret))).status).toBe(200);
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from credentials where name = 'escalate'`);
    expect(rows[0].n).toBe(0);
  });

  it('a read-only key gets 403 on a write, a full key of another account 404 on an object', async () => {
    const inv = await call('POST', '/v1/invoices', as(keys.sandbox), { customer_email: 'a@example.test', amount: '1' });
    const id = inv.body.data.id;
    expectError(await call('PATCH', `/v1/invoices/${id}`, as(keys.sandbox_read_only), { amount: '2' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('PATCH', `/v1/invoices/${id}`, as(other.sandbox), { amount: '2' }), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('GET', `/v1/invoices/${id}`, as(other.sandbox_read_only)), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('GET', `/v1/invoices/${id}`, as(keys.live_read_only)), 404, 'invalid_request_error', 'resource_missing');
  });

  // The permission is the key's, not the body's: a read-only key's malformed write used to get the
  // body's 400 (validation ran first), its well-formed one the 403.
  it('a read-only key gets 403 on a write whatever its body: unknown fields, missing fields, invalid JSON', async () => {
    const ro = as(keys.sandbox_read_only);
    const writes: [HttpMethod, string, unknown][] = [
      ['POST', '/v1/invoices', { customer_email: 'a@example.test', amount: '1', bogus: 1 }],
      ['POST', '/v1/products', { name: 'x', bogus: 1 }],
      ['POST', '/v1/credentials', {}],
      ['PATCH', '/v1/payment-links/plink_x', { max_payments: 3 }],
      ['POST', '/v1/webhook_endpoints', { url: 5 }],
      ['POST', '/v1/test_helpers/payment-links/plink_x/payments', { amount: 1 }],
    ];
    for (const [method, url, body] of writes) {
      expectError(await call(method, url, ro, body), 403, 'permission_error', 'permission_denied');
    }
    const broken = await request(fx.api.app, 'POST', '/v1/invoices', { headers: { ...ro, 'content-type': 'application/json' }, payload: '{"amount": ' });
    expectError(broken, 403, 'permission_error', 'permission_denied');
    // A full key with the same bodies still gets the body's 400.
    expectError(await call('POST', '/v1/products', as(keys.sandbox), { name: 'x', bogus: 1 }), 400, 'invalid_request_error', 'validation_failed');    // Webhook endpoints are full-access only, reads included: a malformed read is the 403 too.
    for (const url of ['/v1/webhook_endpoints/we_x/deliveries?limit=abc', `/v1/webhook_endpoints/we_${'x'.repeat(80)}`, '/v1/webhook_endpoints']) {
      expectError(await call('GET', url, ro), 403, 'permission_error', 'permission_denied');
    }
  });

  it('live keys get 403 on every test helper', async () => {
    for (const url of ['/v1/test_helpers/invoices/inv_x/pay', '/v1/test_helpers/payment-links/plink_x/payments']) {
      expectError(await call('POST', url, as(keys.live), {}), 403, 'permission_error', 'live_mode_forbidden');
      expectError(await call('POST', url, as(keys.live_read_only), {}), 403, 'permission_error', 'live_mode_forbidden');
    }
  });

  it('a revoked key fails with 401 on its very next request, on this and on a second API process', async () => {
    const second = await createApiRuntime(fx.env.config(), createLogger('silent'));
    const onSecond = apiClient(second.app);
    try {
      await second.app.ready();
      const victim = await createKey({ name: 'to revoke' });
      // Both processes accept it before the revocation.
      expect((await call('GET', '/v1/payment-links', as(victim.secret))).status).toBe(200);
      expect((await onSecond.call('GET', '/v1/payment-links', as(victim.secret))).status).toBe(200);

      const revoked = await call('DELETE', `/v1/credentials/${victim.id}`, as(keys.sandbox));
      expect(revoked.status).toBe(200);
      expect(Object.keys(revoked.body.data).sort()).toEqual(CREDENTIAL_FIELDS);
      expect(revoked.body.data).toMatchObject({ id: victim.id, revoked: true });
      expect(revoked.body.data.revoked_at).toMatch(/Z$/);
      expect(revoked.body.data).not.toHaveProperty('secret');

      expectError(await onSecond.call('GET', '/v1/payment-links', as(victim.secret)), 401, 'authentication_error', 'api_key_revoked');
      expectError(await call('GET', '/v1/payment-links', as(victim.secret)), 401, 'authentication_error', 'api_key_revoked');
      expectError(await onSecond.call('GET', '/v1/payment-links', { 'x-api-key': victim.secret }), 401, 'authentication_error', 'api_key_revoked');
      expectError(await call('POST', '/v1/credentials', as(victim.secret), { name: 'resurrect' }), 401, 'authentication_error', 'api_key_revoked');

      // Revoking again keeps the first instant.
      const again = await onSecond.call('DELETE', `/v1/credentials/${victim.id}`, as(keys.sandbox));
      expect(again.status).toBe(200);
      expect(again.body.data.revoked_at).toBe(revoked.body.data.revoked_at);
    } finally {
      await second.close();
    }
  });

  it('a key can revoke itself, and its request after that is refused', async () => {
    const self = await createKey({ name: 'self' });
    expect((await call('DELETE', `/v1/credentials/${self.id}`, as(self.secret))).status).toBe(200);
    expectError(await call('GET', '/v1/payment-links', as(self.secret)), 401, 'authentication_error', 'api_key_revoked');
  });

  it("another account's key and the other environment's key are 404 and stay valid", async () => {
    const theirs = await createKey({ name: 'theirs' }, other.sandbox);
    const liveKey = await createKey({ name: 'live' }, keys.live);
    expectError(await call('DELETE', `/v1/credentials/${theirs.id}`, as(keys.sandbox)), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('DELETE', `/v1/credentials/${liveKey.id}`, as(keys.sandbox)), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('DELETE', '/v1/credentials/cred_doesnotexist', as(keys.sandbox)), 404, 'invalid_request_error', 'resource_missing');
    expect((await call('GET', '/v1/payment-links', as(theirs.secret))).status).toBe(200);
    expect((await call('GET', '/v1/payment-links', as(liveKey.secret))).status).toBe(200);
  });

  it('validates the create body', async () => {
    expectError(await call('POST', '/v1/credentials', as(keys.sandbox), {}), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', '/v1/credentials', as(keys.sandbox), { name: 'x', permission: 'admin' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', '/v1/credentials', as(keys.sandbox), { name: 'x', environment: 'live' }), 400, 'invalid_request_error', 'validation_failed');
  });
});

describe('API key cap', () => {
  it(`at most ${MAX_ACTIVE_API_KEYS} active keys per account and environment, even for concurrent requests; revoking frees a place`, async () => {
    expect(MAX_ACTIVE_API_KEYS).toBe(100);
    const { keys: mine, accountId } = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Many Keys', email: null });
    const active = async () =>
      (await fx.api.pool.query(`select count(*)::int as n from credentials where account_id = $1 and environment = 'sandbox' and revoked_at is null`, [accountId])).rows[0].n as number;
    const before = await active();
    const results = await Promise.all(Array.from({ length: 120 }, (_, i) => call('POST', '/v1/credentials', as(mine.sandbox), { name: `k${i}` })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(100 - before);
    for (const r of results.filter((res) => res.status !== 200)) expectError(r, 400, 'invalid_request_error', 'api_key_limit_reached');
    expect(await active()).toBe(100);
    // Live is counted apart.
    expect((await call('POST', '/v1/credentials', as(mine.live), { name: 'live one' })).status).toBe(200);
    const revoke = await call('DELETE', `/v1/credentials/${results.find((r) => r.status === 200)!.body.data.id}`, as(mine.sandbox));
    expect(revoke.status).toBe(200);
    expect((await call('POST', '/v1/credentials', as(mine.sandbox), { name: 'after revoke' })).status).toBe(200);
  });
});
