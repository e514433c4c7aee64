// SSRF attacks on webhook endpoints with WEBHOOK_ALLOW_PRIVATE_NETWORKS unset (the production
// default), per docs/events-and-webhooks.md "SSRF" and "SSRF at delivery": other spellings of
// internal addresses at registration, endpoints that reach the worker pointing inside (an endpoint
// row left from before, a name that rebinds after registration, a name that rebinds between the
// delivery's host check and its connection), and none may ever receive a request.
import dns from 'node:dns';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { insertEndpoint } from '../../src/db/webhook-endpoints.js';
import { newId } from '../../src/domain/ids.js';
import { newWebhookSecret } from '../../src/domain/webhooks.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, expectError, type ApiClient, type JsonBody } from '../helpers/http.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

const STRICT = {
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '200',
  WEBHOOK_TIMEOUT_MS: '3000',
  OUTBOX_RELAY_INTERVAL_MS: '100',
};

let fx: ApiFixture;
let api: ApiClient;
let receiver: WebhookReceiver;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  fx = await startApiFixture(STRICT);
  expect(fx.api.app).toBeDefined();
  api = apiClient(fx.api.app);
  receiver = await startWebhookReceiver();
});
afterEach(async () => {
  vi.restoreAllMocks();
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  await receiver?.close();
  await fx?.close();
});

async function worker(): Promise<WorkerRuntime> {
  const w = await startWorker(fx.env.config(STRICT));
  cleanups.push(() => w.close());
  return w;
}

async function merchant() {
  return provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'SSRF Probe Ltd', email: null });
}

async function invoice(key: string): Promise<string> {
  const res = await api.post('/v1/invoices', key, { customer_email: 'ssrf@example.test', amount: '10', network: 'base-sepolia' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.id;
}

async function deliveryRows(endpointId: string) {
  const { rows } = await fx.api.pool.query<{ status: string; attempt_count: number; last_error: string | null }>(
    'select status, attempt_count, last_error from webhook_deliveries where endpoint_id = $1 order by created_at',
    [endpointId],
  );
  return rows;
}

type Answer = { address: string; family: number }[];
/** The resolver answers `name` with what `answer` says on the n-th lookup of it (1-based); other names as usual. */
function fakeDns(name: string, answer: (n: number) => Answer): { lookups: () => number } {
  const real = dns.promises.lookup.bind(dns.promises);
  let n = 0;
  vi.spyOn(dns.promises, 'lookup').mockImplementation(((host: string, opts: unknown) => {
    if (host !== name) return real(host, opts as never);
    n += 1;
    const a = answer(n);
    return Promise.resolve((opts as { all?: boolean })?.all ? a : a[0]);
  }) as never);
  return { lookups: () => n };
}

const PUBLIC: Answer = [{ address: '93.184.215.14', family: 4 }];
const LOOPBACK: Answer = [{ address: '127.0.0.1', family: 4 }];

describe('SSRF at registration (no WEBHOOK_ALLOW_PRIVATE_NETWORKS)', () => {
  it('refuses other spellings of loopback, private and metadata addresses (decimal, octal, hex, short, IPv6 forms)', async () => {
    const { keys } = await merchant();
    const refused: string[] = [];
    for (const url of [
      'http://2130706433/', 'http://0x7f000001/', 'http://017700000001/', 'http://0177.0.0.1/', 'http://0x7f.0.0.1/', 'http://127.1/', 'http://127.0.1/',
      'http://0/', 'http://0x0/', 'http://2852039166/latest/meta-data', 'http://0xa9fea9fe/', 'http://0251.0376.0251.0376/', 'http://169.254.169.254./',
      'http://10.0.0.1./', 'http://0xa.1/', 'http://3232235521/', 'http://[::ffff:a9fe:a9fe]/', 'http://[::ffff:10.0.0.1]/', 'http://[0:0:0:0:0:ffff:127.0.0.1]/',
      'http://[fc00::1]/', 'http://[fdff:ffff::1]/', 'http://[fe80::1]/', 'http://[fec0::1]/', 'http://[::]/', 'http://[ff02::1]/',
      'http://[64:ff9b::7f00:1]/', 'http://[64:ff9b:1::a00:1]/', 'http://[2002:7f00:1::1]/', 'http://[2001::1]/', 'http://[2001:db8::1]/', 'http://[100::1]/',
      'http://localhost./', 'http://LOCALHOST/', 'http://a.localhost/', 'http://127.0.0.1.:8080/', 'http://127.0.0.1\\@93.184.215.14/',
      'http://192.0.0.1/', 'http://198.18.0.1/', 'http://240.0.0.1/', 'http://255.255.255.255/', 'http://224.0.0.1/', 'http://100.127.255.254/',
    ]) {
      const res = await post(keys.sandbox, url);
      if (res.status !== 400 || res.body.error.code !== 'webhook_url_not_public') refused.push(`${url} -> ${res.status} ${res.raw}`);
    }
    expect(refused).toEqual([]);
  });

  it('refuses non-http schemes, credentials in any form, and URLs beyond 2048 characters', async () => {
    const { keys } = await merchant();
    const wrong: string[] = [];
    for (const url of [
      'file:///etc/passwd', 'gopher://93.184.215.14:70/_x', 'ftp://93.184.215.14/', 'ws://93.184.215.14/', 'wss://93.184.215.14/', 'data:text/plain,x',
      'javascript:alert(1)', 'dict://93.184.215.14:11211/', 'ldap://93.184.215.14/', 'https://user@93.184.215.14/', 'https://:pw@93.184.215.14/',
      'https://93.184.215.14%40127.0.0.1/', 'https://93.184.215.14/#frag',
    ]) {
      const res = await post(keys.sandbox, url);
      if (res.status !== 400 || !['webhook_url_invalid', 'webhook_url_not_public', 'validation_failed'].includes(res.body.error.code)) wrong.push(`${url} -> ${res.status} ${res.raw}`);
    }
    expect(wrong).toEqual([]);
    const long = await post(keys.sandbox, `https://93.184.215.14/${'a'.repeat(2100)}`);
    expectError(long, 400, 'invalid_request_error', 'validation_failed');
  });

  it('a name resolving to a public and a private address is refused, and the answer stays unnamed', async () => {
    const { keys } = await merchant();
    fakeDns('mixed.attacker.test', () => [...PUBLIC, { address: '10.0.0.7', family: 4 }]);
    const res = await post(keys.sandbox, 'https://mixed.attacker.test/hook');
    expectError(res, 400, 'invalid_request_error', 'webhook_url_not_public');
    expect(res.raw).not.toMatch(/10\.0\.0\.7|93\.184/);
  });

  async function post(key: string, url: string) {
    return api.post('/v1/webhook_endpoints', key, { url, enabled_events: ['*'] });
  }
});

describe('SSRF at delivery (no WEBHOOK_ALLOW_PRIVATE_NETWORKS)', () => {
  it('endpoint rows pointing inside in other spellings (name, mapped IPv6, short IPv4) never get a request; errors never name what a name resolved to', async () => {
    await worker();
    const { accountId, keys } = await merchant();
    const p = receiver.port;
    const urls = [`http://localhost:${p}/in-a`, `http://[::ffff:7f00:1]:${p}/in-b`, `http://127.1:${p}/in-c`, `http://2130706433:${p}/in-d`, `http://localhost.:${p}/in-e`];
    const ids: string[] = [];
    // Rows as an older version, an operator, or a host that was public at registration left them.
    for (const url of urls) {
      const row = await insertEndpoint(fx.api.pool, {
        id: newId('we'), scope: { accountId, environment: 'sandbox' }, url, description: null, enabledEvents: ['*'], secret: newWebhookSecret(),
      });
      ids.push(row.id);
    }
    await invoice(keys.sandbox);
    await waitUntil(async () => {
      for (const id of ids) if (((await deliveryRows(id))[0]?.attempt_count ?? 0) < 1) return false;
      return true;
    }, 30_000);
    expect(receiver.received.filter((r) => r.path.startsWith('/in-'))).toEqual([]);
    for (const [i, id] of ids.entries()) {
      const [d] = await deliveryRows(id);
      expect(d.last_error, urls[i]).toMatch(/^refused: /);
      if (!/^\d|\[/.test(new URL(urls[i]).hostname)) expect(d.last_error, urls[i]).not.toMatch(/127\.0\.0\.1|::1/);
    }
  }, 60_000);

  it('DNS rebinding: a name public at registration and loopback at delivery never gets a request', async () => {
    await worker();
    const { keys } = await merchant();
    const dnsState = fakeDns('rebind.attacker.test', (n) => (n === 1 ? PUBLIC : LOOPBACK));
    const res = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: `http://rebind.attacker.test:${receiver.port}/rebind`, enabled_events: ['*'] });
    expect(res.status, res.raw).toBe(200);
    await invoice(keys.sandbox);
    await waitUntil(async () => ((await deliveryRows(res.body.data.id))[0]?.attempt_count ?? 0) >= 2, 30_000);
    expect(dnsState.lookups()).toBeGreaterThan(1);
    expect(receiver.at('/rebind')).toEqual([]);
    const [d] = await deliveryRows(res.body.data.id);
    expect(d.last_error).toBe('refused: the host rebind.attacker.test does not resolve to public addresses only');
  }, 60_000);

  it('DNS rebinding between the delivery\'s host check and its connection (public, then loopback) never gets a request', async () => {
    await worker();
    const { keys } = await merchant();
    // 1: registration, 2: the claim's host check; the connection's own lookup (3) and on: loopback.
    const dnsState = fakeDns('toctou.attacker.test', (n) => (n <= 2 ? PUBLIC : LOOPBACK));
    const res = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: `http://toctou.attacker.test:${receiver.port}/toctou`, enabled_events: ['*'] });
    expect(res.status, res.raw).toBe(200);
    await invoice(keys.sandbox);
    await waitUntil(async () => ((await deliveryRows(res.body.data.id))[0]?.attempt_count ?? 0) >= 1, 30_000);
    expect(dnsState.lookups()).toBeGreaterThanOrEqual(3);
    expect(receiver.at('/toctou')).toEqual([]);
    const [d] = await deliveryRows(res.body.data.id);
    expect(d.last_error).toMatch(/^refused: /);
    expect(d.last_error).not.toMatch(/127\.0\.0\.1/);
  }, 60_000);

  it('a name that answers IPv4-mapped or IPv4-compatible IPv6 loopback at delivery never gets a request', async () => {
    await worker();
    const { keys } = await merchant();
    fakeDns('mapped.attacker.test', (n) => (n === 1 ? PUBLIC : n % 2 ? [{ address: '::ffff:127.0.0.1', family: 6 }] : [{ address: '::127.0.0.1', family: 6 }]));
    const res = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: `http://mapped.attacker.test:${receiver.port}/mapped`, enabled_events: ['*'] });
    expect(res.status, res.raw).toBe(200);
    await invoice(keys.sandbox);
    await waitUntil(async () => ((await deliveryRows(res.body.data.id))[0]?.attempt_count ?? 0) >= 2, 30_000);
    expect(receiver.at('/mapped')).toEqual([]);
  }, 60_000);

  it('a PATCH to an internal URL is refused, so the endpoint keeps delivering nowhere inside', async () => {
    const { keys } = await merchant();
    const res = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: 'https://93.184.215.14/hook', enabled_events: ['*'] });
    expect(res.status).toBe(200);
    for (const url of [`http://2130706433:${receiver.port}/x`, `http://[::ffff:7f00:1]:${receiver.port}/x`, 'http://169.254.169.254/latest/meta-data/']) {
      expectError(await api.patch(`/v1/webhook_endpoints/${res.body.data.id}`, keys.sandbox, { url }), 400, 'invalid_request_error', 'webhook_url_not_public');
    }
    const got: JsonBody = (await api.get(`/v1/webhook_endpoints/${res.body.data.id}`, keys.sandbox)).body.data;
    expect(got.url).toBe('https://93.184.215.14/hook');
  });
});
