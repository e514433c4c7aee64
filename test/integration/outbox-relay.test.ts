// The worker's outbox relay against a real database and queue store: a row no retry can hand over
// (a job name the catalogue does not know) is set aside once, and the rows after it flow.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import pg from 'pg';
import { insertOutbox, pendingOutbox } from '../../src/db/outbox.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { jobIdOf } from '../../src/queue/catalogue.js';
import { publishQuietly } from '../../src/http/route-helpers.js';
import { fastPathPublisher } from '../../src/queue/outbox-relay.js';
import { startOutboxRelayLoop } from '../../src/runtime/outbox-relay-loop.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;

beforeAll(async () => {
  fx = await startApiFixture();
});
afterAll(async () => {
  await fx?.close();
});

describe('outbox relay', () => {
  it('a row of an unknown job is set aside (marked, logged once, counted) and the rows after it are handed over', async () => {
    const db = fx.api.pool;
    // Written by hand, or by a newer version rolled back: the oldest pending row.
    await db.query(`insert into outbox (job_name, job_id, payload) values ('invoice.teleport', 'poison-1', '{"invoiceId":"inv_x"}')`);
    const good = ['inv_relay_a', 'inv_relay_b', 'inv_relay_c'].map((invoiceId) => ({ invoiceId, deliveryId: `dlv_${invoiceId}` }));
    for (const payload of good) {
      await db.query('insert into outbox (job_name, job_id, payload) values ($1, $2, $3)', ['invoice.send', jobIdOf('invoice.send', payload), JSON.stringify(payload)]);
    }

    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', new Writable({ write: (chunk, _enc, cb) => (lines.push(JSON.parse(String(chunk)) as Record<string, unknown>), cb()) }));
    const metrics = createMetrics({ queues: [], db, defaultMetrics: false });
    const loop = startOutboxRelayLoop(db, fx.api.queues, 3_600_000, log, metrics);
    try {
      expect(await loop.relayNow()).toBe(4);
      // A second pass finds nothing pending: the poison row is not read again.
      expect(await loop.relayNow()).toBe(0);
    } finally {
      await loop.stop();
    }

    for (const payload of good) {
      const job = await fx.api.queues.send.getJob(jobIdOf('invoice.send', payload));
      expect(job?.data, payload.invoiceId).toEqual(payload);
    }
    const { rows } = await db.query<{ job_id: string; enqueued: boolean; failed: boolean; failed_reason: string | null }>(
      'select job_id, enqueued_at is not null as enqueued, failed_at is not null as failed, failed_reason from outbox order by id',
    );
    expect(rows).toEqual([
      { job_id: 'poison-1', enqueued: false, failed: true, failed_reason: 'unknown_job' },
      ...good.map((p) => ({ job_id: jobIdOf('invoice.send', p), enqueued: true, failed: false, failed_reason: null })),
    ]);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ job_name: 'invoice.teleport', job_id: 'poison-1', reason: 'unknown_job' });
    expect(await metrics.registry.getSingleMetricAsString('invoice_outbox_set_aside_total')).toContain('invoice_outbox_set_aside_total{reason="unknown_job"} 1');
    // The backlog gauge counts what is still to hand over: a set-aside row is not.
    expect(await metrics.registry.getSingleMetricAsString('invoice_outbox_backlog')).toMatch(/invoice_outbox_backlog 0$/m);
  });

  // A pass adds few jobs of a name one by one and many in one bulk statement; both end as the same
  // jobs. On the Postgres backend their keep policy is by age alone: a count there costs a scan of
  // every kept job at each job's end (src/queue/backend.ts, postgresJobOptions).
  it('a backlog is handed over in bulk and a few rows one by one, each with the catalogue options; on Postgres kept by age alone', async () => {
    const db = fx.api.pool;
    const sends = Array.from({ length: 20 }, (_, i) => ({ invoiceId: `inv_bulk_${i}`, deliveryId: `dlv_bulk_${i}` }));
    const receipts = [0, 1].map((i) => ({ invoiceId: `inv_one_${i}`, deliveryId: `dlv_one_${i}` }));
    const rows = [...sends.map((p) => ['invoice.send', p] as const), ...receipts.map((p) => ['invoice.receipt', p] as const)];
    for (const [name, payload] of rows) {
      await db.query('insert into outbox (job_name, job_id, payload) values ($1, $2, $3)', [name, jobIdOf(name, payload), JSON.stringify(payload)]);
    }
    const metrics = createMetrics({ queues: [], db, defaultMetrics: false });
    const loop = startOutboxRelayLoop(db, fx.api.queues, 3_600_000, createLogger('silent'), metrics);
    try {
      expect(await loop.relayNow()).toBe(22);
    } finally {
      await loop.stop();
    }
    const ids = rows.map(([name, payload]) => jobIdOf(name, payload));
    const stored = await db.query<{ id: string; name: string; data: unknown; opts: { attempts: number; removeOnComplete: unknown; removeOnFail: unknown } }>(
      'select id, name, data, opts from bullmq.job where queue = $1 and id = any($2::text[]) order by id',
      ['invoice-send', ids],
    );
    expect(stored.rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    for (const job of stored.rows) {
      expect(job.opts, job.id).toMatchObject({ attempts: 100, removeOnComplete: { age: 86_400 }, removeOnFail: { age: 14 * 86_400 } });
      expect(job.opts.removeOnComplete, job.id).not.toHaveProperty('count');
    }
    expect(stored.rows.find((r) => r.id === ids[21])).toMatchObject({ name: 'invoice.receipt', data: receipts[1] });
  });

  // The id is read as text (a bigint): ordered by that column, "10000000000" came before
  // "9999999999", so once ids gained a digit the oldest waiting rows went after every newer one.
  it('the oldest pending rows come first, ids compared as numbers', async () => {
    const db = fx.api.pool;
    await db.query(`insert into outbox (id, job_name, job_id, payload) values (9999999999, 'test.order', 'order-old', '{}'), (10000000000, 'test.order', 'order-new', '{}')`);
    try {
      expect((await pendingOutbox(db, 1)).map((r) => r.job_id)).toEqual(['order-old']);
    } finally {
      await db.query(`delete from outbox where job_name = 'test.order'`);
    }
  });

  // The API hands its send over right after its commit; the commit used to wake every worker's
  // relay too, which added the same job again (a no-op add, about 1 ms of the database's work a
  // send on the Postgres backend) and marked the row again.
  it('a held row: its commit wakes no relay and the relay skips it; a failed hand-over gives it back at once; an unheld row wakes the relay', async () => {
    const db = fx.api.pool;
    const heard: string[] = [];
    const listener = new pg.Client({ connectionString: fx.env.config().databaseUrl });
    await listener.connect();
    listener.on('notification', (n) => n.channel === 'outbox_pending' && heard.push(n.payload ?? ''));
    await listener.query('listen outbox_pending');
    const metrics = createMetrics({ queues: [], db, defaultMetrics: false });
    const loop = startOutboxRelayLoop(db, fx.api.queues, 3_600_000, createLogger('silent'), metrics);
    const job = (invoiceId: string) => {
      const payload = { invoiceId, deliveryId: `dlv_${invoiceId}` };
      return { job_name: 'invoice.send' as const, job_id: jobIdOf('invoice.send', payload), payload };
    };
    const held = job('inv_held');
    try {
      await insertOutbox(db, held.job_name, held.job_id, held.payload, 60_000);
      // Notifications arrive in commit order: had the held row's commit notified, its empty
      // payload would come before this marker.
      await db.query(`select pg_notify('outbox_pending', 'marker')`);
      await waitUntil(async () => heard.includes('marker'));
      expect(heard).toEqual(['marker']);
      expect(await pendingOutbox(db, 10)).toEqual([]);
      expect(await loop.relayNow()).toBe(0);

      // The fast path times out (a queue store that never answers): the request is not failed,
      // and the row goes back to the relay, which is woken for it.
      const warned: string[] = [];
      const stuck = fastPathPublisher({ publish: () => new Promise<void>(() => undefined) }, 50);
      await publishQuietly({ outbox: stuck, pool: db }, [held], { warn: (_o, m) => warned.push(m) });
      expect(warned).toEqual(['enqueue after commit failed; the outbox relay will hand the job over']);
      await waitUntil(async () => heard.length === 2);
      expect(heard).toEqual(['marker', '']);
      expect((await pendingOutbox(db, 10)).map((r) => r.job_id)).toEqual([held.job_id]);
      expect(await loop.relayNow()).toBe(1);
      expect((await fx.api.queues.send.getJob(held.job_id))?.data).toEqual(held.payload);

      // A row written without a hold (by a job, a trigger) wakes the relay at its commit.
      const plain = job('inv_plain');
      await insertOutbox(db, plain.job_name, plain.job_id, plain.payload);
      await waitUntil(async () => heard.length === 3);
      expect(heard).toEqual(['marker', '', '']);
      expect(await loop.relayNow()).toBe(1);
    } finally {
      await loop.stop();
      await listener.end();
    }
  });

  // The API died between its commit and its hand-over: nothing NOTIFYs, and the relay's timer
  // (an hour here) is not what takes the row: the relay wakes itself when the hold ends.
  it('a row whose hold ends without a hand-over is relayed then, without waiting for the timer', async () => {
    const db = fx.api.pool;
    const payload = { invoiceId: 'inv_orphan', deliveryId: 'dlv_orphan' };
    const jobId = jobIdOf('invoice.send', payload);
    await insertOutbox(db, 'invoice.send', jobId, payload, 300);
    const metrics = createMetrics({ queues: [], db, defaultMetrics: false });
    const loop = startOutboxRelayLoop(db, fx.api.queues, 3_600_000, createLogger('silent'), metrics);
    try {
      expect(await loop.relayNow()).toBe(0);
      await waitUntil(async () => (await db.query('select 1 from outbox where job_id = $1 and enqueued_at is not null', [jobId])).rowCount === 1);
      expect((await fx.api.queues.send.getJob(jobId))?.data).toEqual(payload);
    } finally {
      await loop.stop();
    }
  });

  it('a send through the API writes its row held for the route, which hands it over itself', async () => {
    const db = fx.api.pool;
    const headers = { 'api-key': fx.merchant.keys.sandbox };
    const created = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers, payload: { customer_email: 'held@example.test', amount: '4' } });
    const id = created.json<{ data: { id: string } }>().data.id;
    expect((await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers })).statusCode).toBe(200);
    const sent = await db.query<{ held: boolean; enqueued: boolean; job_id: string }>(
      `select held_until is not null as held, enqueued_at is not null as enqueued, job_id from outbox where payload->>'invoiceId' = $1`,
      [id],
    );
    expect(sent.rows.map(({ held, enqueued }) => ({ held, enqueued }))).toEqual([{ held: true, enqueued: true }]);
    expect(await fx.api.queues.send.getJob(sent.rows[0].job_id)).toBeTruthy();
  });
});
