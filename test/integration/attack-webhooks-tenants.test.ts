// Tenant against tenant on webhooks and events (docs/events-and-webhooks.md, docs/api.md): another
// account (or environment) can neither read, change, rotate nor page through an account's
// endpoints, deliveries or events, nor get its events delivered; and one tenant's hanging
// endpoints must not hold the delivery slots every other tenant needs.
import { describe, expect, it } from 'vitest';
import { accountBoundOf } from '../../src/webhooks/deliver-batch.js';
import { expectError } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';
import { useWebhookFixture } from '../helpers/webhook-fixture.js';

const { fx, api, receiver, worker, merchant, endpoint, invoice } = useWebhookFixture();

describe('tenant isolation of webhooks and events', () => {
  it("another account or environment gets 404 on every route of an account's endpoint, and changes nothing", async () => {
    const a = await merchant('Tenant A');
    const b = await merchant('Tenant B');
    const ep = await endpoint(a.sandbox, '/iso-a');
    const before = (await api.get(`/v1/webhook_endpoints/${ep.id}`, a.sandbox)).body.data;
    for (const key of [b.sandbox, b.live, a.live]) {
      expectError(await api.patch(`/v1/webhook_endpoints/${ep.id}`, key, { url: receiver.url('/stolen'), status: 'disabled', enabled_events: ['invoice.paid'] }), 404, 'invalid_request_error', 'resource_missing');
      expectError(await api.get(`/v1/webhook_endpoints/${ep.id}/deliveries`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await api.del(`/v1/webhook_endpoints/${ep.id}`, key), 404, 'invalid_request_error', 'resource_missing');
      expect((await api.get('/v1/webhook_endpoints', key)).raw).not.toContain(ep.id);
    }
    for (const key of [a.sandbox_read_only, b.sandbox_read_only]) {
      expectError(await api.get(`/v1/webhook_endpoints/${ep.id}/deliveries`, key), 403, 'permission_error', 'permission_denied');
      expectError(await api.patch(`/v1/webhook_endpoints/${ep.id}`, key, { status: 'disabled' }), 403, 'permission_error', 'permission_denied');
      expectError(await api.del(`/v1/webhook_endpoints/${ep.id}`, key), 403, 'permission_error', 'permission_denied');
    }
    expect((await api.get(`/v1/webhook_endpoints/${ep.id}`, a.sandbox)).body.data).toEqual(before);
  });

  it("an account's events and deliveries are unreachable by cursor from another account or environment; B's endpoint gets only B's events", async () => {
    await worker();
    const a = await merchant('Tenant A2');
    const b = await merchant('Tenant B2');
    const epA = await endpoint(a.sandbox, '/cur-a');
    const epB = await endpoint(b.sandbox, '/cur-b');
    const invA = await invoice(a.sandbox);
    const invALive = await invoice(a.live, 'base');
    const invB = await invoice(b.sandbox);
    await receiver.waitFor((all) => all.some((r) => r.path === '/cur-a' && r.event.data.object.id === invA) && all.some((r) => r.path === '/cur-b' && r.event.data.object.id === invB));
    await waitUntil(async () => (await api.get(`/v1/webhook_endpoints/${epA.id}/deliveries`, a.sandbox)).body.data.length > 0);
    const delA: string = (await api.get(`/v1/webhook_endpoints/${epA.id}/deliveries`, a.sandbox)).body.data[0].id;
    const evA: string = (await api.get('/v1/events?limit=1&type=invoice.created', a.sandbox)).body.data[0].id;
    const evALive: string = (await api.get('/v1/events?limit=1&type=invoice.created', a.live)).body.data[0].id;
    expect(evALive).not.toBe(evA);

    // A's delivery id as B's cursor (on B's own endpoint): refused, nothing of A's listed.
    expectError(await api.get(`/v1/webhook_endpoints/${epB.id}/deliveries?starting_after=${delA}`, b.sandbox), 400, 'invalid_request_error', 'invalid_cursor');
    // A's events as B's cursors, in both directions, with and without a type filter; and A's live event in A's sandbox.
    for (const [key, ev] of [[b.sandbox, evA], [b.live, evALive], [a.sandbox, evALive], [a.live, evA]] as const) {
      for (const q of [`starting_after=${ev}`, `ending_before=${ev}`, `starting_after=${ev}&type=invoice.created`, `ending_before=${ev}&type=invoice.created`]) {
        const res = await api.get(`/v1/events?${q}`, key);
        expect(res.status, `${q}: ${res.raw}`).toBe(400);
      }
      expectError(await api.get(`/v1/events/${ev}`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    const listedB = await api.get('/v1/events?limit=100', b.sandbox);
    expect(listedB.raw).not.toContain(invA);
    expect(listedB.raw).not.toContain(invALive);
    expect(receiver.at('/cur-b').map((r) => r.event.data.object.id)).not.toContain(invA);
    expect(receiver.at('/cur-a').map((r) => r.event.data.object.id)).not.toContain(invALive);
    for (const r of receiver.at('/cur-b')) expect(r.verifiedWith).toEqual([0]);
    // Nothing of A's (either environment) is owed to B's endpoint.
    const { rows } = await fx.api.pool.query(
      `select count(*)::int as n from webhook_deliveries d join events e on e.id = d.event_id where d.endpoint_id = $1 and e.object_id = any($2::text[])`,
      [epB.id, [invA, invALive]],
    );
    expect(rows[0].n).toBe(0);
  }, 60_000);

  it('a tenant with two hanging endpoints (default WEBHOOK_CONCURRENCY and WEBHOOK_ENDPOINT_CONCURRENCY) holds at most all but a fifth of the slots: another tenant\'s event still arrives', async () => {
    // The defaults: 50 in flight per worker, 32 per endpoint. A timeout far beyond the test: the
    // hanging requests end only when released.
    await worker({ WEBHOOK_TIMEOUT_MS: '60000' });
    const attacker = await merchant('Slowloris Ltd');
    const victim = await merchant('Innocent Co');
    await endpoint(attacker.sandbox, '/hang-1', ['invoice.created']);
    await endpoint(attacker.sandbox, '/hang-2', ['invoice.created']);
    receiver.answer('/hang-1', () => 'hang');
    receiver.answer('/hang-2', () => 'hang');
    await endpoint(victim.sandbox, '/victim', ['invoice.created']);
    for (let i = 0; i < 40; i++) await invoice(attacker.sandbox);
    // One account holds at most all but a fifth of the 50 slots (accountBoundOf): 40 in flight.
    await receiver.waitFor((all) => all.filter((r) => r.path.startsWith('/hang-')).length >= accountBoundOf(50), 30_000, 'the attacker\'s requests in flight');
    const victimInvoice = await invoice(victim.sandbox);
    try {
      // "a slow endpoint holds its own slots and its own waiting deliveries, never the others'".
      await receiver.waitFor((all) => all.some((r) => r.path === '/victim' && r.event.data.object.id === victimInvoice), 20_000, "the victim's event while the attacker's endpoints hang");
      expect(receiver.received.filter((r) => r.path.startsWith('/hang-')).length).toBe(accountBoundOf(50));
    } finally {
      receiver.answer('/hang-1', () => 200);
      receiver.answer('/hang-2', () => 200);
      receiver.release();
    }
  }, 90_000);
});
