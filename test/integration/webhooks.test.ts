// Webhook delivery end to end: API -> events (same transaction) -> outbox -> fan-out -> signed
// POST to a real HTTP receiver on loopback that verifies every signature with the
// `standardwebhooks` library. Backoff is configured in milliseconds so retries take no time.
import { describe, expect, it } from 'vitest';
import { type JsonBody } from '../helpers/http.js';
import { startWebhookReceiver, type Received } from '../helpers/webhook-receiver.js';
import { spawnWorker, waitUntil, workerProcessEnv, type WorkerProcess } from '../helpers/worker.js';
import { FAST, useWebhookFixture } from '../helpers/webhook-fixture.js';

const { fx, api, receiver, worker, cleanups, merchant, endpoint, invoice } = useWebhookFixture();

const ofType = (path: string, type: string, objectId?: string) => (all: Received[]) =>
  all.filter((r) => r.path === path && r.event.type === type && (objectId === undefined || r.event.data.object.id === objectId));

function expectAllVerified(path: string): void {
  const list = receiver.at(path);
  expect(list.length).toBeGreaterThan(0);
  for (const r of list) expect(r.verifiedWith, `${r.event.type} ${r.webhookId}`).not.toEqual([]);
}

async function deliveryRows(endpointId: string) {
  const { rows } = await fx.api.pool.query<{ event_id: string; status: string; attempt_count: number; last_error: string | null }>(
    'select event_id, status, attempt_count, last_error from webhook_deliveries where endpoint_id = $1 order by created_at',
    [endpointId],
  );
  return rows;
}

describe('webhook delivery', () => {
  it('send -> invoice.sent; paid by direct SQL -> exactly one invoice.paid; each verified, body = the event of the API', async () => {
    await worker();
    const keys = await merchant();
    await endpoint(keys.sandbox, '/a');
    const id = await invoice(keys.sandbox);
    expect((await api.post(`/v1/invoices/${id}/send`, keys.sandbox)).status).toBe(200);
    await receiver.waitFor((all) => ofType('/a', 'invoice.sent', id)(all).length === 1, 20_000, 'invoice.sent');
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now(), updated_at = now() where id = $1`, [id]);
    await receiver.waitFor((all) => ofType('/a', 'invoice.paid', id)(all).length === 1, 20_000, 'invoice.paid');
    // A later event proves the moment for a duplicate has passed.
    const later = await invoice(keys.sandbox);
    await receiver.waitFor((all) => ofType('/a', 'invoice.created', later)(all).length === 1, 20_000, 'marker');
    expect(ofType('/a', 'invoice.paid', id)(receiver.received)).toHaveLength(1);
    const paid = ofType('/a', 'invoice.paid', id)(receiver.received)[0];
    const viaApi = await api.get(`/v1/events/${paid.webhookId}`, keys.sandbox);
    expect(JSON.parse(paid.body)).toEqual(viaApi.body.data);
    expect(paid.event.data.object).toMatchObject({ id, status: 'paid' });
    expectAllVerified('/a');
  });

  it('an event written by plain SQL is relayed on its NOTIFY at commit, not at the relay timer', async () => {
    // The timer would take ten minutes: only the NOTIFY can deliver within the wait.
    await worker({ OUTBOX_RELAY_INTERVAL_MS: '600000' });
    const keys = await merchant();
    await endpoint(keys.sandbox, '/notify');
    const id = await invoice(keys.sandbox);
    await fx.api.pool.query(`update invoices set status = 'void', voided_at = now(), updated_at = now() where id = $1`, [id]);
    await receiver.waitFor((all) => ofType('/notify', 'invoice.voided', id)(all).length === 1, 20_000, 'invoice.voided');
    expectAllVerified('/notify');
  });

  it('500 twice then 200: three requests with the same webhook-id, the delivery ends succeeded with its attempts', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/flaky', ['invoice.created']);
    receiver.answer('/flaky', (n) => (n <= 2 ? 500 : 200));
    const id = await invoice(keys.sandbox);
    await receiver.waitFor((all) => ofType('/flaky', 'invoice.created', id)(all).length === 3, 20_000, 'three attempts');
    const got = receiver.at('/flaky');
    expect(got.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(new Set(got.map((r) => r.webhookId)).size).toBe(1);
    expectAllVerified('/flaky');
    await waitUntil(async () => (await deliveryRows(ep.id))[0]?.status === 'succeeded');
    const list = await api.get(`/v1/webhook_endpoints/${ep.id}/deliveries`, keys.sandbox);
    const d = list.body.data[0];
    expect(d).toMatchObject({ status: 'succeeded', attempt_count: 3, last_status_code: 200, next_retry_at: null, event_type: 'invoice.created' });
    expect(d.attempts.map((a: JsonBody) => a.status_code)).toEqual([500, 500, 200]);
    expect(d.attempts[0].error).toBe('HTTP 500');
    for (const a of d.attempts) expect(a.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('a receiver down for a while gets everything once it is back', async () => {
    const down = await startWebhookReceiver();
    const port = down.port;
    await down.close(); // nothing listens on the port now
    await worker();
    const keys = await merchant();
    const res = await api.post('/v1/webhook_endpoints', keys.sandbox, { url: `http://127.0.0.1:${port}/back`, enabled_events: ['*'] });
    const ep = res.body.data;
    const ids = [await invoice(keys.sandbox), await invoice(keys.sandbox), await invoice(keys.sandbox)];
    await waitUntil(async () => (await deliveryRows(ep.id)).filter((d) => d.attempt_count >= 2).length === 3, 20_000);
    const listed = await api.get(`/v1/webhook_endpoints/${ep.id}/deliveries`, keys.sandbox);
    expect(listed.body.data[0].status).toBe('pending');
    expect(listed.body.data[0].next_retry_at).not.toBeNull();
    expect(listed.body.data[0].attempts[0].status_code).toBeNull();
    const back = await startWebhookReceiver(port);
    cleanups.push(() => back.close());
    back.setSecrets('/back', [ep.secret]);
    await back.waitFor((all) => ids.every((id) => all.some((r) => r.event.data.object.id === id)), 20_000, 'every event');
    for (const r of back.received) expect(r.verifiedWith).toEqual([0]);
    await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'));
  });

  it('"*" gets every kind, a filtered endpoint only its kinds', async () => {
    await worker();
    const keys = await merchant();
    await endpoint(keys.sandbox, '/all', ['*']);
    await endpoint(keys.sandbox, '/paid', ['invoice.paid']);
    const id = await invoice(keys.sandbox);
    await api.post(`/v1/invoices/${id}/send`, keys.sandbox);
    await api.post(`/v1/test_helpers/invoices/${id}/pay`, keys.sandbox);
    // Order is not guaranteed: wait for every kind the "*" endpoint is owed.
    await receiver.waitFor(
      (all) => ['invoice.created', 'invoice.sent', 'invoice.paid'].every((t) => ofType('/all', t, id)(all).length === 1) && ofType('/paid', 'invoice.paid', id)(all).length === 1,
    );
    expect(receiver.at('/all').map((r) => r.event.type).sort()).toEqual(['invoice.created', 'invoice.paid', 'invoice.sent']);
    expect(receiver.at('/paid').map((r) => r.event.type)).toEqual(['invoice.paid']);
  });

  it('a sandbox endpoint never sees live events', async () => {
    await worker();
    const keys = await merchant();
    await endpoint(keys.sandbox, '/sandbox-only');
    const live = await invoice(keys.live, 'base');
    const sandbox = await invoice(keys.sandbox);
    await receiver.waitFor((all) => ofType('/sandbox-only', 'invoice.created', sandbox)(all).length === 1);
    // The live event was committed first; its fan-out has had every chance.
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from webhook_deliveries d join events e on e.id = d.event_id where e.object_id = $1`, [live]);
    expect(rows[0].n).toBe(0);
    expect(receiver.at('/sandbox-only').every((r) => r.event.environment === 'sandbox')).toBe(true);
  });

  it('a private address is refused at delivery time too, without the flag', async () => {
    await worker({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' });
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/private');
    await invoice(keys.sandbox);
    await waitUntil(async () => ((await deliveryRows(ep.id))[0]?.attempt_count ?? 0) >= 1, 20_000);
    const [d] = await deliveryRows(ep.id);
    expect(d.last_error).toMatch(/^refused: .*127\.0\.0\.1.*not a public address/);
    expect(receiver.at('/private')).toEqual([]);
  });

  it('rotate_secret: during the overlap every request verifies with the old secret and with the new one', async () => {
    await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/rotated');
    const rotated = await api.post(`/v1/webhook_endpoints/${ep.id}/rotate_secret`, keys.sandbox);
    receiver.setSecrets('/rotated', [ep.secret, rotated.body.data.secret]);
    await invoice(keys.sandbox);
    await receiver.waitFor((all) => all.some((r) => r.path === '/rotated'));
    const [r] = receiver.at('/rotated');
    expect(r.signature.split(' ')).toHaveLength(2);
    expect(r.verifiedWith).toEqual([0, 1]);
  });

  it('failing for the whole retry window: the delivery ends failed and the endpoint is disabled with a reason', async () => {
    // The window is counted from the first attempt, and a retry is made only if it falls inside
    // it: 800 ms left no room for a second attempt when the first took most of it on a loaded
    // machine (a fresh-clone run: one attempt, then given up). 3 s leaves room for several.
    await worker({ WEBHOOK_RETRY_WINDOW_MS: '3000' });
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/broken', ['invoice.created']);
    receiver.answer('/broken', () => 503);
    await invoice(keys.sandbox);
    await waitUntil(async () => (await deliveryRows(ep.id))[0]?.status === 'failed', 20_000);
    await waitUntil(async () => (await api.get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox)).body.data.status === 'disabled', 20_000);
    const got = await api.get(`/v1/webhook_endpoints/${ep.id}`, keys.sandbox);
    expect(got.body.data.disabled_reason).toMatch(/failed .*HTTP 503/);
    expect(receiver.at('/broken').length).toBeGreaterThan(1);
    // A disabled endpoint gets no new deliveries.
    const marker = await endpoint(keys.sandbox, '/marker', ['invoice.created']);
    const next = await invoice(keys.sandbox);
    await receiver.waitFor((all) => ofType('/marker', 'invoice.created', next)(all).length === 1);
    expect((await deliveryRows(ep.id)).length).toBe(1);
    expect(marker.status).toBe('enabled');
  });

  it('a worker killed mid-delivery loses nothing: another worker delivers it, with the same webhook-id', async () => {
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/crash', ['invoice.created']);
    receiver.answer('/crash', (n) => (n === 1 ? 'hang' : 200));
    const env = workerProcessEnv(fx.env.config(FAST), { ...FAST, WORKER_LOCK_DURATION_MS: '1000', WORKER_STALLED_INTERVAL_MS: '1000' });
    const first: WorkerProcess = spawnWorker(env);
    cleanups.push(() => first.stop('SIGKILL'));
    await first.waitForLine((l) => l.msg === 'worker started', 60_000);
    const id = await invoice(keys.sandbox);
    await receiver.waitFor((all) => ofType('/crash', 'invoice.created', id)(all).length === 1, 20_000, 'the first, hanging request');
    await first.stop('SIGKILL');
    const second = spawnWorker(env);
    cleanups.push(() => second.stop());
    await receiver.waitFor((all) => ofType('/crash', 'invoice.created', id)(all).length >= 2, 60_000, 'the redelivery');
    await waitUntil(async () => (await deliveryRows(ep.id))[0]?.status === 'succeeded', 20_000);
    const got = ofType('/crash', 'invoice.created', id)(receiver.received);
    expect(new Set(got.map((r) => r.webhookId)).size).toBe(1);
    receiver.release();
  }, 150_000);

  it('prunes events older than the retention, keeps recent ones', async () => {
    await worker({ EVENTS_PRUNE_EVERY: 'PT1S' });
    const keys = await merchant();
    const id = await invoice(keys.sandbox);
    await fx.api.pool.query(`update events set created_at = now() - interval '31 days' where object_id = $1`, [id]);
    const recent = await invoice(keys.sandbox);
    await waitUntil(async () => (await fx.api.pool.query('select 1 from events where object_id = $1', [id])).rowCount === 0, 20_000);
    expect((await fx.api.pool.query('select 1 from events where object_id = $1', [recent])).rowCount).toBe(1);
  });
});
