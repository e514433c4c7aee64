// Webhook endpoints over HTTP: the secret shown once, CRUD, rotation with its overlap, full-access
// keys only, per environment, and the SSRF rules on the URL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, expectError, useApiFixture, type JsonBody } from '../helpers/http.js';
import { newId } from '../../src/domain/ids.js';
import { MAX_WEBHOOK_ENDPOINTS } from '../../src/domain/webhooks.js';
import { provisionMerchant } from '../../src/runtime/provision.js';

// This file's API refuses private networks (the default); a second one allows them.
const { fx, keys, other, get, post, patch, del } = useApiFixture();

let permissive: ApiFixture;
beforeAll(async () => {
  permissive = await startApiFixture({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
});
afterAll(async () => {
  await permissive?.close();
});

const ENDPOINT_FIELDS = [
  'id', 'url', 'description', 'enabled_events', 'status', 'disabled_reason', 'environment', 'previous_secret_expires_at', 'created_at', 'updated_at',
].sort();

async function create(body: JsonBody, key = keys.sandbox): Promise<JsonBody> {
  const res = await post('/v1/webhook_endpoints', key, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

describe('webhook endpoints', () => {
  it('returns the signing secret once, at creation; never again', async () => {
    const ep = await create({ url: 'https://93.184.215.14/hooks', enabled_events: ['invoice.paid', 'invoice.sent'], description: 'ERP' });
    expect(ep.id).toMatch(/^we_/);
    expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(() => new Webhook(ep.secret)).not.toThrow();
    expect(ep).toMatchObject({ url: 'https://93.184.215.14/hooks', enabled_events: ['invoice.paid', 'invoice.sent'], description: 'ERP', status: 'enabled', disabled_reason: null, environment: 'sandbox' });
    const again = await get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox);
    expect(Object.keys(again.body.data).sort()).toEqual(ENDPOINT_FIELDS);
    const list = await get('/v1/webhook_endpoints', keys.sandbox);
    expect(list.body.data.find((e: JsonBody) => e.id === ep.id)).toEqual(again.body.data);
    expect(list.raw).not.toContain(ep.secret);
  });

  it('an Idempotency-Key replay of the creation returns the same endpoint without its secret', async () => {
    const headers = { 'api-key': keys.sandbox, 'idempotency-key': `we-${Date.now()}` };
    const body = { url: 'https://93.184.215.14/idem', enabled_events: ['*'] };
    const first = await post('/v1/webhook_endpoints', headers, body);
    const replay = await post('/v1/webhook_endpoints', headers, body);
    expect(first.body.data.secret).toMatch(/^whsec_/);
    expect(replay.body.data.id).toBe(first.body.data.id);
    expect(replay.body.data.secret).toBeUndefined();
  });

  it('updates url, events, description and status; re-enabling clears the reason', async () => {
    const ep = await create({ url: 'https://93.184.215.14/a-update', enabled_events: ['*'] });
    const off = await patch(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox, { status: 'disabled' });
    expect(off.body.data).toMatchObject({ status: 'disabled', disabled_reason: 'disabled by the merchant' });
    const on = await patch(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox, {
      status: 'enabled', url: 'https://93.184.215.14/b', enabled_events: ['invoice.paid'], description: 'new',
    });
    expect(on.body.data).toMatchObject({ status: 'enabled', disabled_reason: null, url: 'https://93.184.215.14/b', enabled_events: ['invoice.paid'], description: 'new' });
    expect(on.body.data.secret).toBeUndefined();
  });

  it('deletes an endpoint: 404 afterwards', async () => {
    const ep = await create({ url: 'https://93.184.215.14/a-delete', enabled_events: ['*'] });
    const res = await del(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox);
    expect(res.body.data).toEqual({ id: ep.id, deleted: true });
    expectError(await get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expectError(await del(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
  });

  it('rotate_secret returns a new secret; the old one stays valid for 24 hours', async () => {
    const ep = await create({ url: 'https://93.184.215.14/a-rotate', enabled_events: ['*'] });
    const before = Date.now();
    const res = await post(`/v1/webhook_endpoints/${ep.id}/rotate_secret`, keys.sandbox);
    expect(res.status).toBe(200);
    expect(res.body.data.secret).toMatch(/^whsec_/);
    expect(res.body.data.secret).not.toBe(ep.secret);
    const expires = Date.parse(res.body.data.previous_secret_expires_at);
    expect(expires - before).toBeGreaterThan(24 * 3600_000 - 60_000);
    expect(expires - before).toBeLessThan(24 * 3600_000 + 60_000);
  });

  it('is for full-access keys only, and per environment and account', async () => {
    const ep = await create({ url: 'https://93.184.215.14/a-scoped', enabled_events: ['*'] });
    expectError(await get('/v1/webhook_endpoints', keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    expectError(await get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    expectError(await post('/v1/webhook_endpoints', keys.sandbox_read_only, { url: 'https://93.184.215.14/a', enabled_events: ['*'] }), 403, 'permission_error', 'permission_denied');
    expectError(await get(`/v1/webhook_endpoints/${ep.id}`, keys.live), 404, 'invalid_request_error', 'resource_missing');
    expectError(await get(`/v1/webhook_endpoints/${ep.id}`, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expect((await get('/v1/webhook_endpoints', keys.live)).body.data.some((e: JsonBody) => e.id === ep.id)).toBe(false);
  });

  it('checks the events and the URL shape', async () => {
    const bad = (body: JsonBody, key = keys.sandbox) => post('/v1/webhook_endpoints', key, body);
    expectError(await bad({ url: 'https://93.184.215.14/a', enabled_events: [] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await bad({ url: 'https://93.184.215.14/a', enabled_events: ['invoice.nope'] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await bad({ url: 'https://93.184.215.14/a', enabled_events: ['*', 'invoice.paid'] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await bad({ url: 'https://93.184.215.14/a' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await bad({ url: '/relative', enabled_events: ['*'] }), 400, 'invalid_request_error', 'webhook_url_invalid');
    expectError(await bad({ url: 'ftp://93.184.215.14/a', enabled_events: ['*'] }), 400, 'invalid_request_error', 'webhook_url_invalid');
    expectError(await bad({ url: 'https://user:pw@93.184.215.14/a', enabled_events: ['*'] }), 400, 'invalid_request_error', 'webhook_url_invalid');
    // Live endpoints must be https; sandbox ones may be http.
    expectError(await bad({ url: 'http://93.184.215.14/a', enabled_events: ['*'] }, keys.live), 400, 'invalid_request_error', 'webhook_url_invalid');
    expect((await bad({ url: 'http://93.184.215.14/a', enabled_events: ['*'] })).status).toBe(200);
    expect((await bad({ url: 'https://93.184.215.14/a', enabled_events: ['*'] }, keys.live)).status).toBe(200);
  });

  it('refuses loopback, private, link-local and other non-public hosts, at creation and on update', async () => {
    for (const url of [
      'http://127.0.0.1:8080/hook', 'http://localhost/hook', 'http://10.1.2.3/hook', 'http://192.168.0.10/', 'http://172.16.5.4/',
      'http://169.254.169.254/latest/meta-data', 'http://[::1]/hook', 'http://[fd00::1]/', 'http://[::ffff:127.0.0.1]/', 'http://0.0.0.0/',
      'http://100.64.0.1/', 'http://no-such-host.invalid/',
    ]) {
      const res = await post('/v1/webhook_endpoints', keys.sandbox, { url, enabled_events: ['*'] });
      expectError(res, 400, 'invalid_request_error', 'webhook_url_not_public');
    }
    const ep = await create({ url: 'https://93.184.215.14/a-private-update', enabled_events: ['*'] });
    expectError(await patch(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox, { url: 'http://127.0.0.1/x' }), 400, 'invalid_request_error', 'webhook_url_not_public');
  });

  it('refuses IPv4-compatible IPv6 literals (all of ::/96)', async () => {
    for (const url of ['http://[::127.0.0.1]/', 'http://[::7f00:1]/', 'http://[::2]/', 'http://[::a9fe:a9fe]/latest', 'http://[::8.8.8.8]/']) {
      expectError(await post('/v1/webhook_endpoints', keys.sandbox, { url, enabled_events: ['*'] }), 400, 'invalid_request_error', 'webhook_url_not_public');
    }
  });

  it('a refused host name is named, never what it resolves to (internal DNS stays internal)', async () => {
    for (const url of ['http://localhost/hook', 'http://localhost.localdomain/', 'http://no-such-host.invalid/']) {
      const res = await post('/v1/webhook_endpoints', keys.sandbox, { url, enabled_events: ['*'] });
      expectError(res, 400, 'invalid_request_error', 'webhook_url_not_public');
      const host = new URL(url).hostname;
      expect(res.body.error.message).toBe(`url is refused: the host ${host} does not resolve to public addresses only. Webhooks are delivered to public addresses only.`);
      expect(res.raw).not.toMatch(/127\.0\.0\.1|::1|ENOTFOUND|EAI_AGAIN/);
    }
  });

  it('PATCH of an unknown endpoint id is 404 before the URL is looked at', async () => {
    for (const url of ['http://localhost/hook', 'http://[::7f00:1]/', 'https://93.184.215.14/fine']) {
      expectError(await patch('/v1/webhook_endpoints/we_doesnotexist', keys.sandbox, { url }), 404, 'invalid_request_error', 'resource_missing');
    }
  });

  it('accepts private addresses when WEBHOOK_ALLOW_PRIVATE_NETWORKS=true', async () => {
    const client = apiClient(permissive.api.app);
    const res = await client.post('/v1/webhook_endpoints', permissive.merchant.keys.sandbox, { url: 'http://127.0.0.1:8080/hook', enabled_events: ['*'] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it(`at most ${MAX_WEBHOOK_ENDPOINTS} endpoints per account and environment, even for concurrent requests`, async () => {
    expect(MAX_WEBHOOK_ENDPOINTS).toBe(16);
    const { keys: mine, accountId } = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Capped Hooks', email: null });
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => post('/v1/webhook_endpoints', mine.sandbox, { url: `https://93.184.215.14/cap-${i}`, enabled_events: ['*'] })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(16);
    for (const r of results.filter((res) => res.status !== 200)) expectError(r, 400, 'invalid_request_error', 'webhook_endpoint_limit_reached');
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from webhook_endpoints where account_id = $1 and environment = 'sandbox'`, [accountId]);
    expect(rows[0].n).toBe(16);
    // Per environment: live has its own 16.
    expect((await post('/v1/webhook_endpoints', mine.live, { url: 'https://93.184.215.14/cap-live', enabled_events: ['*'] })).status).toBe(200);
    // Deleting one frees its place.
    await del(`/v1/webhook_endpoints/${results.find((r) => r.status === 200)!.body.data.id}`, mine.sandbox);
    expect((await post('/v1/webhook_endpoints', mine.sandbox, { url: 'https://93.184.215.14/cap-again', enabled_events: ['*'] })).status).toBe(200);
  });

  it('one endpoint per URL per account and environment (409), even for concurrent requests, on create and on update', async () => {
    const { keys: mine } = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'One URL', email: null });
    const url = 'https://93.184.215.14/same';
    const results = await Promise.all(Array.from({ length: 10 }, () => post('/v1/webhook_endpoints', mine.sandbox, { url, enabled_events: ['*'] })));
    const created = results.filter((r) => r.status === 200);
    expect(created).toHaveLength(1);
    for (const r of results.filter((res) => res.status !== 200)) expectError(r, 409, 'invalid_request_error', 'webhook_endpoint_exists');
    // The same URL as written differently (the URL is stored normalised) is the same URL.
    expectError(await post('/v1/webhook_endpoints', mine.sandbox, { url: 'HTTPS://93.184.215.14:443/same', enabled_events: ['*'] }), 409, 'invalid_request_error', 'webhook_endpoint_exists');
    const second = await post('/v1/webhook_endpoints', mine.sandbox, { url: `${url}-2`, enabled_events: ['*'] });
    expectError(await patch(`/v1/webhook_endpoints/${second.body.data.id}`, mine.sandbox, { url }), 409, 'invalid_request_error', 'webhook_endpoint_exists');
    // Its own URL again is no conflict; the same URL in live or in another account is allowed.
    expect((await patch(`/v1/webhook_endpoints/${created[0].body.data.id}`, mine.sandbox, { url, description: 'same' })).status).toBe(200);
    expect((await post('/v1/webhook_endpoints', mine.live, { url, enabled_events: ['*'] })).status).toBe(200);
    expect((await post('/v1/webhook_endpoints', other.sandbox, { url, enabled_events: ['*'] })).status).toBe(200);
  });

  it('lists deliveries, paginated, empty for a new endpoint; a foreign cursor is a 400', async () => {
    const ep = await create({ url: 'https://93.184.215.14/a-deliveries', enabled_events: ['*'] });
    const res = await get(`/v1/webhook_endpoints/${ep.id}/deliveries`, keys.sandbox);
    expect(res.body).toEqual({ data: [], has_more: false });
    expectError(await get(`/v1/webhook_endpoints/${ep.id}/deliveries?starting_after=whd_x`, keys.sandbox), 400, 'invalid_request_error', 'invalid_cursor');
    expectError(await get(`/v1/webhook_endpoints/${ep.id}/deliveries?limit=0`, keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
  });
});
