// Webhook deliveries in batches (src/webhooks/deliver-batch.ts): many deliveries to several
// endpoints claimed and recorded together, a failing endpoint retried while the others deliver,
// the per-endpoint bound, a worker killed mid-batch, the fan-out left from before the batches,
// and the SQL twin of "an endpoint wants this kind". A real HTTP receiver on loopback verifies
// every signature with the `standardwebhooks` library.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { claimDueDeliveries } from '../../src/db/webhook-deliveries.js';
import { presentEvent } from '../../src/http/presenters.js';
import { createDeliveryPump } from '../../src/webhooks/deliver-batch.js';
import { createWebhookSender } from '../../src/webhooks/sender.js';
import { endpointWants, EVENT_TYPES } from '../../src/domain/events.js';
import { type JsonBody } from '../helpers/http.js';
import { type Received } from '../helpers/webhook-receiver.js';
import { spawnWorker, startWorker, waitUntil, workerProcessEnv, type WorkerProcess } from '../helpers/worker.js';
import { FAST, useWebhookFixture } from '../helpers/webhook-fixture.js';

const hooks = useWebhookFixture();
const { fx, api, receiver, worker, cleanups, merchant } = hooks;

// Every endpoint of this file listens to invoice.created alone.
const endpoint = (key: string, path: string) => hooks.endpoint(key, path, ['invoice.created']);

/** `count` invoices (one invoice.created event each), created through the API. */
async function invoices(key: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await api.post('/v1/invoices', key, { customer_email: `batch-${i}@example.test`, amount: '10', network: 'base-sepolia' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(res.body.data.id);
  }
  return ids;
}

const createdAt = (path: string, all: Received[]) => all.filter((r) => r.path === path && r.event.type === 'invoice.created');
const objectIds = (path: string, all: Received[]) => new Set(createdAt(path, all).map((r) => r.event.data.object.id as string));

async function deliveryRows(endpointId: string) {
  const { rows } = await fx.api.pool.query<{ id: string; event_id: string; status: string; attempt_count: number; lease_id: string | null }>(
    'select id, event_id, status, attempt_count, lease_id from webhook_deliveries where endpoint_id = $1 order by created_at',
    [endpointId],
  );
  return rows;
}

describe('webhook deliveries in batches', () => {
  it('many deliveries to several endpoints: each (event, endpoint) arrives verified, and every delivery succeeds at its first attempt', async () => {
    await worker();
    const keys = await merchant();
    const eps = [await endpoint(keys.sandbox, '/many-a'), await endpoint(keys.sandbox, '/many-b'), await endpoint(keys.sandbox, '/many-c')];
    const ids = await invoices(keys.sandbox, 20);
    await receiver.waitFor((all) => ['/many-a', '/many-b', '/many-c'].every((p) => objectIds(p, all).size === ids.length), 60_000, 'every event at every endpoint');
    for (const [i, ep] of eps.entries()) {
      await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'), 20_000);
      const rows = await deliveryRows(ep.id);
      expect(rows).toHaveLength(ids.length);
      expect(rows.every((d) => d.attempt_count === 1 && d.lease_id === null)).toBe(true);
      const got = createdAt(`/many-${'abc'[i]}`, receiver.received);
      expect(got).toHaveLength(ids.length);
      for (const r of got) expect(r.verifiedWith).toEqual([0]);
      // The webhook-id is the event id, the same for every endpoint.
      expect(new Set(got.map((r) => r.webhookId))).toEqual(new Set(rows.map((d) => d.event_id)));
    }
  });

  it('a failing endpoint is retried while the others deliver at their first attempt', async () => {
    await worker();
    const keys = await merchant();
    const ok1 = await endpoint(keys.sandbox, '/ok-1');
    const ok2 = await endpoint(keys.sandbox, '/ok-2');
    const bad = await endpoint(keys.sandbox, '/bad');
    receiver.answer('/bad', (n) => (n <= 6 ? 500 : 200));
    const ids = await invoices(keys.sandbox, 8);
    await receiver.waitFor(
      (all) => objectIds('/ok-1', all).size === ids.length && objectIds('/ok-2', all).size === ids.length && createdAt('/bad', all).filter((r) => r.status === 200).length === ids.length,
      60_000,
      'every event, the failing endpoint included once it answers',
    );
    for (const ep of [ok1, ok2]) {
      await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'), 20_000);
      expect((await deliveryRows(ep.id)).map((d) => d.attempt_count)).toEqual(ids.map(() => 1));
    }
    await waitUntil(async () => (await deliveryRows(bad.id)).every((d) => d.status === 'succeeded'), 20_000);
    const badRows = await deliveryRows(bad.id);
    // Six failed attempts, each retried: eight successes, fourteen attempts in all.
    expect(badRows.reduce((n, d) => n + d.attempt_count, 0)).toBe(ids.length + 6);
    expect(createdAt('/bad', receiver.received).filter((r) => r.status === 500)).toHaveLength(6);
    const listed = await api.get(`/v1/webhook_endpoints/${bad.id}/deliveries`, keys.sandbox);
    const retried = (listed.body.data as JsonBody[]).filter((d) => d.attempt_count > 1);
    expect(retried.length).toBeGreaterThan(0);
    for (const d of retried) {
      expect(d.attempts.map((a: JsonBody) => a.status_code).slice(-1)).toEqual([200]);
      expect(d.attempts.slice(0, -1).every((a: JsonBody) => a.status_code === 500 && a.error === 'HTTP 500')).toBe(true);
    }
    // A 2xx since: the endpoint's failure clock is stopped.
    const { rows } = await fx.api.pool.query<{ failing_since: Date | null; status: string }>('select failing_since, status from webhook_endpoints where id = $1', [bad.id]);
    expect(rows[0]).toEqual({ failing_since: null, status: 'enabled' });
  });

  it('WEBHOOK_ENDPOINT_CONCURRENCY: a hanging endpoint holds only its own slots, the others deliver', async () => {
    // A timeout far beyond the test: the hanging requests only end when released.
    await worker({ WEBHOOK_ENDPOINT_CONCURRENCY: '2', WEBHOOK_TIMEOUT_MS: '60000' });
    const keys = await merchant();
    const slow = await endpoint(keys.sandbox, '/slow');
    await endpoint(keys.sandbox, '/fast');
    receiver.answer('/slow', () => 'hang');
    const ids = await invoices(keys.sandbox, 6);
    await receiver.waitFor((all) => objectIds('/fast', all).size === ids.length, 30_000, 'every event at the fast endpoint');
    // Every claim that delivered the fast endpoint's events skipped the slow one's: it is at its bound.
    await receiver.waitFor((all) => createdAt('/slow', all).length >= 2, 30_000, 'two requests at the slow endpoint');
    expect(createdAt('/slow', receiver.received)).toHaveLength(2);
    receiver.answer('/slow', () => 200);
    receiver.release();
    await receiver.waitFor((all) => objectIds('/slow', all).size === ids.length, 30_000, 'every event at the slow endpoint once released');
    await waitUntil(async () => (await deliveryRows(slow.id)).every((d) => d.status === 'succeeded'), 20_000);
  }, 120_000);

  it('concurrent claims take disjoint deliveries, each at most its limit; a claim after them takes the rest, and then none', async () => {
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/claims');
    await invoices(keys.sandbox, 40);
    const claim = async (limit: number) =>
      (
        await claimDueDeliveries(fx.api.pool, { leaseId: randomUUID(), leaseMs: 60_000, limit, perEndpoint: 1000, busyEndpoints: [], busyRemaining: [], scan: 10_000 })
      ).filter((d) => d.endpoint_id === ep.id);
    const batches = await Promise.all(Array.from({ length: 6 }, () => claim(10)));
    for (const b of batches) expect(b.length).toBeLessThanOrEqual(10);
    const first = batches.flat().map((d) => d.id);
    expect(new Set(first).size).toBe(first.length);
    const rest = (await claim(1000)).map((d) => d.id);
    expect(rest.filter((id) => first.includes(id))).toEqual([]);
    expect(new Set([...first, ...rest]).size).toBe(40);
    expect(await claim(1000)).toEqual([]);
    // Every one is leased once, to the claim that returned it.
    expect((await deliveryRows(ep.id)).every((d) => d.status === 'pending' && d.lease_id !== null)).toBe(true);
  });

  it('claimed one batch ahead: a stopping worker hands back what it claimed and never sent, due at once, and sends each delivery once', async () => {
    // Two in flight to the endpoint, two more claimed and waiting for a slot: the hanging requests
    // hold them until the receiver lets go.
    const w = await startWorker(fx.env.config({ ...FAST, WEBHOOK_CONCURRENCY: '2', WEBHOOK_ENDPOINT_CONCURRENCY: '2', WEBHOOK_TIMEOUT_MS: '60000' }));
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/ahead');
    receiver.answer('/ahead', () => 'hang');
    const ids = await invoices(keys.sandbox, 6);
    await receiver.waitFor((all) => createdAt('/ahead', all).length === 2, 30_000, 'two hanging requests');
    await waitUntil(async () => (await deliveryRows(ep.id)).filter((d) => d.lease_id !== null).length === 4, 20_000);
    const requested = objectIds('/ahead', receiver.received);
    const { rows: leasedUnsent } = await fx.api.pool.query<{ id: string }>(
      `select d.id from webhook_deliveries d join events e on e.id = d.event_id
       where d.endpoint_id = $1 and d.lease_id is not null and not (e.snapshot->>'id' = any($2::text[]))`,
      [ep.id, [...requested]],
    );
    expect(leasedUnsent).toHaveLength(2);

    // SIGTERM's path: the waiting two go back at once, the two in flight are waited for.
    const closing = w.close();
    const back = () =>
      fx.api.pool.query<{ n: number }>(
        `select count(*)::int as n from webhook_deliveries where id = any($1::text[]) and lease_id is null and status = 'pending' and attempt_count = 0 and next_attempt_at is null`,
        [leasedUnsent.map((r) => r.id)],
      );
    await waitUntil(async () => (await back()).rows[0].n === 2, 20_000);
    receiver.answer('/ahead', () => 200);
    receiver.release();
    await closing;
    // Another worker sends the rest, the handed-back two among them: every event arrives, none twice.
    await worker();
    await receiver.waitFor((all) => objectIds('/ahead', all).size === ids.length, 30_000, 'every event at the endpoint');
    await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'), 20_000);
    expect(createdAt('/ahead', receiver.received)).toHaveLength(ids.length);
  }, 120_000);

  it('a waiting delivery whose lease could run out before its request ends is handed back unsent, not sent late', async () => {
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/late');
    receiver.answer('/late', () => 'hang');
    await invoices(keys.sandbox, 2);
    // One slot: the first is sent and hangs, the second waits. A lease of 1.5 s with 1 s kept for
    // a send leaves the waiting one 0.5 s to start: the hanging request outlasts that.
    const sender = createWebhookSender({ timeoutMs: 10_000, allowPrivate: true, perEndpoint: 1 });
    const pump = createDeliveryPump(
      { db: fx.api.pool, sender, retry: { baseMs: 50, maxMs: 400, windowMs: 60_000 }, renderEvent: (e) => presentEvent(e, []) },
      { concurrency: 1, perEndpoint: 1, leaseMs: 1_500, sendMs: 1_000 },
    );
    let claimed = 0;
    await waitUntil(async () => (claimed += await pump.claim()) >= 2, 10_000);
    const claimedBy = Date.now();
    await receiver.waitFor((all) => createdAt('/late', all).length === 1, 10_000, 'the first request');
    // Past the waiting one's start deadline, the slot frees.
    await waitUntil(async () => Date.now() > claimedBy + 500, 5_000);
    // A late start would now be answered: it must not happen.
    receiver.answer('/late', () => 200);
    receiver.release();
    await waitUntil(async () => {
      const rows = await deliveryRows(ep.id);
      return rows.some((r) => r.status === 'succeeded') && rows.every((r) => r.lease_id === null);
    }, 10_000);
    await pump.drain();
    expect(createdAt('/late', receiver.received)).toHaveLength(1);
    const rows = await deliveryRows(ep.id);
    expect(rows.map((r) => [r.status, r.attempt_count, r.lease_id]).sort()).toEqual([
      ['pending', 0, null],
      ['succeeded', 1, null],
    ]);
    await sender.close();
  });

  it('a worker killed mid-batch: its leases run out and every delivery of the batch arrives again, same webhook-id, recorded once', async () => {
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/killed');
    receiver.answer('/killed', (n) => (n <= 5 ? 'hang' : 200));
    // The lease is 4 x WEBHOOK_TIMEOUT_MS + 15 s: 23 s here.
    const env = workerProcessEnv(fx.env.config(FAST), { ...FAST, WEBHOOK_TIMEOUT_MS: '2000' });
    const first: WorkerProcess = spawnWorker(env);
    cleanups.push(() => first.stop('SIGKILL'));
    await first.waitForLine((l) => l.msg === 'worker started', 60_000);
    const ids = await invoices(keys.sandbox, 5);
    await receiver.waitFor((all) => createdAt('/killed', all).length === 5, 30_000, 'the five hanging requests');
    await first.stop('SIGKILL');
    const leased = await deliveryRows(ep.id);
    expect(leased.every((d) => d.status === 'pending' && d.lease_id !== null && d.attempt_count === 0)).toBe(true);
    const second = spawnWorker(env);
    cleanups.push(() => second.stop());
    await receiver.waitFor((all) => createdAt('/killed', all).filter((r) => r.status === 200).length === 5, 90_000, 'the redeliveries');
    await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'), 20_000);
    const got = createdAt('/killed', receiver.received);
    for (const id of ids) {
      const mine = got.filter((r) => r.event.data.object.id === id);
      expect(mine).toHaveLength(2);
      expect(new Set(mine.map((r) => r.webhookId)).size).toBe(1);
    }
    // The killed attempts were never recorded: one attempt each, the redelivery's.
    expect((await deliveryRows(ep.id)).map((d) => [d.attempt_count, d.lease_id])).toEqual(ids.map(() => [1, null]));
    receiver.release();
  }, 180_000);

  it('a fan-out left in the outbox from before the batches still delivers, once', async () => {
    const w = await worker();
    const keys = await merchant();
    const ep = await endpoint(keys.sandbox, '/legacy');
    const [id] = await invoices(keys.sandbox, 1);
    await receiver.waitFor((all) => objectIds('/legacy', all).has(id), 20_000, 'the first delivery');
    // As an upgrade finds it: the event's fan-out row in the outbox, its delivery not yet written.
    const { rows } = await fx.api.pool.query<{ id: string }>(`select id from events where object_id = $1 and type = 'invoice.created'`, [id]);
    await fx.api.pool.query('delete from webhook_deliveries where event_id = $1', [rows[0].id]);
    await fx.api.pool.query(`insert into outbox (job_name, job_id, payload) values ('webhook.fanout', $1, $2)`, [
      `webhook.fanout-${rows[0].id}`,
      JSON.stringify({ eventId: rows[0].id }),
    ]);
    await w.relayOutbox();
    await receiver.waitFor((all) => createdAt('/legacy', all).filter((r) => r.event.data.object.id === id).length === 2, 20_000, 'the fan-out delivery');
    await waitUntil(async () => (await deliveryRows(ep.id)).every((d) => d.status === 'succeeded'), 20_000);
    expect(await deliveryRows(ep.id)).toHaveLength(1);
  });

  it('webhook_endpoint_wants (SQL, in emit_event) agrees with endpointWants for every kind', async () => {
    const lists = [['*'], ['invoice.paid'], ['invoice.paid', 'invoice.sent'], [], ['payment.confirmed', '*']];
    for (const list of lists) {
      for (const kind of EVENT_TYPES) {
        const { rows } = await fx.api.pool.query<{ wants: boolean }>('select webhook_endpoint_wants($1::text[], $2) as wants', [list, kind]);
        expect([list, kind, rows[0].wants]).toEqual([list, kind, endpointWants(list, kind)]);
      }
    }
  });
});
