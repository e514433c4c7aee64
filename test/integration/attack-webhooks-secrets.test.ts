// Signing secrets under attack (docs/events-and-webhooks.md "Webhook endpoints" and "Delivery";
// docs/api.md): the secret is returned by create and rotate_secret only, never by another route,
// an Idempotency-Key replay, an error, or a log line (API and worker, at trace); a rotation signs
// with both secrets during its overlap and with the new one only after it; a second rotation drops
// the first secret.
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { jobHandlers } from '../../jobs/index.js';
import { newId } from '../../src/domain/ids.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import { createWorkerRuntime, type WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { apiClient, expectError, type ApiClient, type JsonBody } from '../helpers/http.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { waitUntil } from '../helpers/worker.js';

const FAST = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '200',
  WEBHOOK_TIMEOUT_MS: '3000',
  OUTBOX_RELAY_INTERVAL_MS: '100',
};

let env: TestEnv;
let apiRt: ApiRuntime;
let api: ApiClient;
let receiver: WebhookReceiver;
const lines: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const sink = () =>
  new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });

beforeAll(async () => {
  env = await createTestEnv();
  apiRt = await createApiRuntime(env.config({ ...FAST, LOG_LEVEL: 'trace' }), createLogger('trace', sink()));
  await apiRt.app.ready();
  api = apiClient(apiRt.app);
  receiver = await startWebhookReceiver();
});
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  await receiver?.close();
  await apiRt?.close();
  await env?.cleanup();
});

async function worker(): Promise<WorkerRuntime> {
  const w = await createWorkerRuntime(env.config({ ...FAST, LOG_LEVEL: 'trace' }), createLogger('trace', sink()), jobHandlers);
  await Promise.all(w.workers.map((x) => x.waitUntilReady()));
  cleanups.push(() => w.close());
  return w;
}

async function merchant(): Promise<MerchantKeys> {
  return (await provisionMerchant(apiRt.pool, { id: newId('acct'), name: 'Secret Keepers', email: null })).keys;
}

async function invoice(key: string): Promise<string> {
  const res = await api.post('/v1/invoices', key, { customer_email: 'secret@example.test', amount: '10', network: 'base-sepolia' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.id;
}

/** The secret and its key material (the base64 after `whsec_`), as they could leak. */
const forms = (secret: string) => [secret, secret.slice('whsec_'.length)];

describe('webhook secrets', () => {
  it('appear in the create and rotate_secret responses only: never in reads, updates, deliveries, replays or errors', async () => {
    await worker();
    const keys = await merchant();
    const created = await api.post('/v1/webhook_endpoints', { 'api-key': keys.sandbox, 'idempotency-key': `c-${Date.now()}` }, { url: receiver.url('/s1'), enabled_events: ['*'] });
    expect(created.status).toBe(200);
    const first: string = created.body.data.secret;
    const id: string = created.body.data.id;
    const rotKey = `r-${Date.now()}`;
    const rotated = await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, { 'api-key': keys.sandbox, 'idempotency-key': rotKey });
    const second: string = rotated.body.data.secret;
    expect(second).toMatch(/^whsec_/);
    expect(rotated.raw).not.toContain(first.slice('whsec_'.length));
    receiver.setSecrets('/s1', [first, second]);
    await invoice(keys.sandbox);
    await receiver.waitFor((all) => all.some((r) => r.path === '/s1'));
    await waitUntil(async () => (await api.get(`/v1/webhook_endpoints/${id}/deliveries`, keys.sandbox)).body.data.some((d: JsonBody) => d.status === 'succeeded'), 20_000);

    const responses = [
      await api.get(`/v1/webhook_endpoints/${id}`, keys.sandbox),
      await api.get('/v1/webhook_endpoints', keys.sandbox),
      await api.patch(`/v1/webhook_endpoints/${id}`, keys.sandbox, { description: 'x', enabled_events: ['invoice.created'] }),
      await api.patch(`/v1/webhook_endpoints/${id}`, keys.sandbox, { status: 'disabled' }),
      await api.patch(`/v1/webhook_endpoints/${id}`, keys.sandbox, { status: 'enabled', url: receiver.url('/s1-moved') }),
      await api.patch(`/v1/webhook_endpoints/${id}`, keys.sandbox, { url: 'http://no-such-host.invalid/' }),
      await api.get(`/v1/webhook_endpoints/${id}/deliveries`, keys.sandbox),
      await api.get('/v1/events?limit=100', keys.sandbox),
      // The replay of the rotation: the same endpoint, no secret, and no second rotation.
      await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, { 'api-key': keys.sandbox, 'idempotency-key': rotKey }),
    ];
    for (const [i, res] of responses.entries()) {
      for (const s of [...forms(first), ...forms(second)]) expect(res.raw, `response ${i}`).not.toContain(s);
    }
    expect(responses[8].body.data.secret).toBeUndefined();
    // The replay did not rotate again: deliveries still verify with the second secret.
    const { rows } = await apiRt.pool.query<{ secret: string }>('select secret from webhook_endpoints where id = $1', [id]);
    expect(rows[0].secret).toBe(second);
  }, 60_000);

  it('never reach a log line of the API or the worker, even at trace', async () => {
    const keys = await merchant();
    await worker();
    const created = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: receiver.url('/s2'), enabled_events: ['*'] });
    const rotated = await api.post(`/v1/webhook_endpoints/${created.body.data.id}/rotate_secret`, keys.sandbox);
    receiver.answer('/s2', (n) => (n === 1 ? 500 : 200));
    await invoice(keys.sandbox);
    await receiver.waitFor((all) => all.filter((r) => r.path === '/s2').length >= 2);
    expect(lines.length).toBeGreaterThan(0);
    for (const s of [...forms(created.body.data.secret), ...forms(rotated.body.data.secret)]) {
      expect(lines.filter((l) => l.includes(s))).toEqual([]);
    }
  }, 60_000);

  it('a rotation signs with both secrets during the overlap, with the new one only once it ended; a second rotation drops the first secret', async () => {
    await worker();
    const keys = await merchant();
    const created = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: receiver.url('/s3'), enabled_events: ['invoice.created'] });
    const id = created.body.data.id;
    const s1: string = created.body.data.secret;
    const s2: string = (await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, keys.sandbox)).body.data.secret;
    const s3: string = (await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, keys.sandbox)).body.data.secret;
    receiver.setSecrets('/s3', [s1, s2, s3]);
    const a = await invoice(keys.sandbox);
    await receiver.waitFor((all) => all.some((r) => r.path === '/s3' && r.event.data.object.id === a));
    const ra = receiver.at('/s3').find((r) => r.event.data.object.id === a)!;
    expect(ra.verifiedWith).toEqual([1, 2]);
    expect(ra.signature.split(' ')).toHaveLength(2);
    // The overlap ends: only the newest secret signs, and the endpoint no longer shows an expiry.
    await apiRt.pool.query(`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = $1`, [id]);
    const b = await invoice(keys.sandbox);
    await receiver.waitFor((all) => all.some((r) => r.path === '/s3' && r.event.data.object.id === b));
    const rb = receiver.at('/s3').find((r) => r.event.data.object.id === b)!;
    expect(rb.verifiedWith).toEqual([2]);
    expect(rb.signature.split(' ')).toHaveLength(1);
    expect((await api.get(`/v1/webhook_endpoints/${id}`, keys.sandbox)).body.data.previous_secret_expires_at).toBeNull();
  }, 60_000);

  it('rotate_secret of another account\'s or environment\'s endpoint is a 404 and leaves its secret as it was', async () => {
    const a = await merchant();
    const b = await merchant();
    const created = await api.post('/v1/webhook_endpoints', a.sandbox, { url: receiver.url('/s4'), enabled_events: ['*'] });
    const id = created.body.data.id;
    expectError(await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, b.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expectError(await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, a.live), 404, 'invalid_request_error', 'resource_missing');
    expectError(await api.post(`/v1/webhook_endpoints/${id}/rotate_secret`, a.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    const { rows } = await apiRt.pool.query<{ secret: string; previous_secret: string | null }>('select secret, previous_secret from webhook_endpoints where id = $1', [id]);
    expect(rows[0]).toEqual({ secret: created.body.data.secret, previous_secret: null });
  });
});
