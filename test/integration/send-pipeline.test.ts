// The invoice.send pipeline end to end: HTTP send -> outbox -> BullMQ -> PDF -> SMTP, against
// real Postgres, Redis and an SMTP server on loopback.
import { MAX_LINE_ITEMS } from '../../src/domain/invoice-limits.js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import { handUnsentAgain } from '../../src/db/outbox.js';
import { EMAIL_JOB_ATTEMPTS, EMAIL_JOB_OF_DELIVERY, JOBS } from '../../src/queue/catalogue.js';
import { createOutboxRelay } from '../../src/queue/outbox-relay.js';
import { createLogger } from '../../src/log.js';
import { createApiRuntime } from '../../src/runtime/api-runtime.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { spawnWorker, startWorker, waitQueueDrained, waitUntil, workerProcessEnv, type WorkerProcess } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  sink = await startSmtpSink({ onRcpt: (a) => (a.startsWith('reject') ? 550 : null) });
  fx = await startApiFixture({ SMTP_URL: sink.url });
});
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  await fx?.close();
  await sink?.close();
});

function key() {
  return fx.merchant.keys.sandbox;
}

async function createDraft(body: Record<string, unknown>): Promise<string> {
  const res = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers: { 'api-key': key() }, payload: body });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.id;
}

async function send(id: string): Promise<{ code: string }> {
  const res = await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers: { 'api-key': key() } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
}

async function worker(overrides: Record<string, string> = {}): Promise<WorkerRuntime> {
  const w = await startWorker(fx.env.config({ SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100', ...overrides }));
  cleanups.push(() => w.close());
  return w;
}

const to = recipientsOf;
const messagesTo = (email: string) => sink.messages.filter((m) => to(m).includes(email));

async function deliveries(invoiceId: string) {
  const { rows } = await fx.api.pool.query<{ status: string; attempt: number; error: string | null; message_id: string }>(
    `select status, attempt, error, message_id from deliveries where invoice_id = $1 and kind = 'invoice'`,
    [invoiceId],
  );
  return rows;
}

describe('invoice.send', () => {
  it('emails the customer once with the PDF, whose text holds the code, the name, each line and the total', async () => {
    await worker();
    const email = 'athina@example.test';
    const id = await createDraft({
      customer_email: email,
      customer_name: 'Αθηνά Παπαδοπούλου',
      memo: 'Pay soon <script>alert(1)</script>',
      footer: 'Acme Widgets Ltd · 1 Main St',
      tax_id: 'GB123456789',
      due_at: new Date(Date.now() + 10 * 86_400_000).toISOString(),
      line_items: [
        { description: 'Widgets — Дмитрий edition', quantity: 3, unit_amount: '19.99' },
        { description: 'Shipping', quantity: 1, unit_amount: '5.03' },
      ],
    });
    const { code } = await send(id);
    await sink.waitFor(1, 10_000);
    await waitUntil(async () => (await deliveries(id))[0]?.status === 'sent');
    const mine = messagesTo(email);
    expect(mine).toHaveLength(1);
    const msg = mine[0];
    const [delivery] = await deliveries(id);
    expect(msg.messageId).toBe(delivery.message_id);
    expect(msg.subject).toContain(code);
    expect(msg.replyTo?.value[0]?.address).toBe('billing@acme.test');
    expect(msg.from?.value[0]?.address).toBe('billing@example.test');
    // A memo with HTML arrives as text, escaped, never as markup.
    expect(msg.html).not.toContain('<script>');
    expect(msg.html).toContain('&lt;script&gt;');
    expect(msg.text).toContain(`https://pay.example.test/`);

    expect(msg.attachments).toHaveLength(1);
    const pdf = msg.attachments[0];
    expect(pdf.filename).toBe(`invoice-${code}.pdf`);
    expect(pdf.contentType).toBe('application/pdf');
    const text = (await extractPdfText(pdf.content)).join('\n');
    expect(text).toContain(code);
    expect(text).toContain('Αθηνά Παπαδοπούλου');
    expect(text).toContain('Widgets — Дмитрий edition');
    expect(text).toContain('Shipping');
    expect(text).toMatch(/65\.00/); // 3 x 19.99 + 5.03
    expect(text).toContain('USDC');
    expect(text).toContain('GB123456789');
  });

  it('an invoice at the line-item cap gives a multi-page PDF', async () => {
    await worker();
    const email = 'long@example.test';
    const id = await createDraft({
      customer_email: email,
      customer_name: 'Long Invoice Co',
      line_items: Array.from({ length: MAX_LINE_ITEMS }, (_, i) => ({ description: `Line item number ${i + 1}`, quantity: 1, unit_amount: '1.00' })),
    });
    await send(id);
    await waitUntil(async () => messagesTo(email).length === 1, 15_000);
    const pages = await extractPdfText(messagesTo(email)[0].attachments[0].content);
    expect(pages.length).toBeGreaterThan(1);
    const all = pages.join('\n');
    expect(all).toContain('Line item number 1\n'.trim());
    expect(all).toContain(`Line item number ${MAX_LINE_ITEMS}`);
  });

  it('a job run twice, or twice at once, sends one message', async () => {
    const w = await worker();
    const email = 'twice@example.test';
    const id = await createDraft({ customer_email: email, amount: '10' });
    await send(id);
    await waitUntil(async () => (await deliveries(id))[0]?.status === 'sent');
    const { rows } = await fx.api.pool.query<{ payload: { invoiceId: string; deliveryId: string } }>(
      'select payload from outbox where payload->>$2 = $1',
      [id, 'invoiceId'],
    );
    const payload = rows[0].payload;
    // Duplicates under new job ids, so BullMQ runs each: the delivery row is what dedups.
    const dups = await Promise.all(
      [1, 2, 3].map((n) => w.queues.send.add('invoice.send', payload, { ...JOBS['invoice.send'].options, jobId: `dup-${n}-${id}` })),
    );
    await waitUntil(async () => (await Promise.all(dups.map((j) => j.getState()))).every((s) => s === 'completed'));
    expect(messagesTo(email)).toHaveLength(1);
    expect((await deliveries(id))[0]).toMatchObject({ status: 'sent', attempt: 1 });
    // And adding the original job id again is a no-op.
    const again = await w.queues.send.add('invoice.send', payload, { jobId: JOBS['invoice.send'].jobId!(payload) });
    expect(await again.getState()).toBe('completed');
  });

  it('a permanent SMTP rejection is recorded and not retried', async () => {
    const w = await worker();
    const id = await createDraft({ customer_email: 'reject-me@example.test', amount: '5' });
    await send(id);
    await waitUntil(async () => (await deliveries(id))[0]?.status === 'failed', 10_000);
    const [d] = await deliveries(id);
    expect(d.attempt).toBe(1);
    expect(d.error).toMatch(/550/);
    // The row is marked inside the handler; the job reaches the failed set just after it throws.
    const failedJob = async () => (await w.queues.send.getFailed()).find((j) => j.data.invoiceId === id);
    await waitUntil(async () => (await failedJob()) !== undefined, 10_000);
    const job = await failedJob();
    expect(job?.attemptsMade).toBe(1);
    expect(job?.failedReason).toMatch(/permanent/i);
  });

  it('SMTP down then up delivers everything, once', async () => {
    const port = await freePort();
    const w = await worker({ SMTP_URL: `smtp://127.0.0.1:${port}` });
    const emails = ['down1@example.test', 'down2@example.test', 'down3@example.test'];
    const ids: string[] = [];
    for (const email of emails) {
      const id = await createDraft({ customer_email: email, amount: '7.5' });
      await send(id);
      ids.push(id);
    }
    await waitUntil(async () => (await Promise.all(ids.map(deliveries))).every(([d]) => d?.status === 'retrying'), 10_000);
    const late = await startSmtpSink({ port });
    cleanups.push(() => late.close());
    await late.waitFor(3, 20_000);
    await waitUntil(async () => (await Promise.all(ids.map(deliveries))).every(([d]) => d?.status === 'sent'), 10_000);
    // Every send job has finished: no retry is left to send one of them again.
    await waitQueueDrained(w.queues.send);
    expect(late.messages.flatMap(to).sort()).toEqual([...emails].sort());
  });

  it('a send whose job the queue store lost after the hand-over (Redis flushed) is handed over again by the reconciler once its delivery has not moved for 30 minutes: one email', async () => {
    const lost = { email: 'lost-job@example.test', id: '' };
    const recent = { email: 'lost-recently@example.test', id: '' };
    for (const x of [lost, recent]) {
      x.id = await createDraft({ customer_email: x.email, amount: '4.25' });
      await send(x.id);
    }
    const jobIdsOf = async (id: string) =>
      (await fx.api.pool.query<{ job_id: string }>(`select job_id from outbox where job_name = 'invoice.send' and payload->>'invoiceId' = $1 and enqueued_at is not null`, [id])).rows.map((r) => r.job_id);
    // The API handed both over; then the store lost both jobs (no worker has run yet).
    await waitUntil(async () => (await jobIdsOf(lost.id)).length === 1 && (await jobIdsOf(recent.id)).length === 1, 10_000);
    for (const x of [lost, recent]) {
      const [jobId] = await jobIdsOf(x.id);
      await waitUntil(async () => (await fx.api.queues.send.getJob(jobId)) !== undefined, 10_000);
      await fx.api.queues.send.remove(jobId);
      expect(await fx.api.queues.send.getJob(jobId)).toBeUndefined();
    }
    // As a job lost long ago looks: its row handed over, its delivery untouched, for 31 minutes.
    await fx.api.pool.query(`update deliveries set updated_at = now() - interval '31 minutes' where invoice_id = $1 and kind = 'invoice'`, [lost.id]);
    await fx.api.pool.query(`update outbox set enqueued_at = now() - interval '31 minutes' where job_name = 'invoice.send' and payload->>'invoiceId' = $1`, [lost.id]);
    const w = await worker({ RECONCILE_EVERY: 'PT1S' });
    await waitUntil(async () => messagesTo(lost.email).length === 1, 20_000);
    await waitUntil(async () => (await deliveries(lost.id))[0]?.status === 'sent');
    // The run that handed the stale one over saw the recent one in the same statement, and left it to its job.
    expect(await deliveries(recent.id)).toMatchObject([{ status: 'pending', attempt: 0 }]);
    expect(messagesTo(recent.email)).toHaveLength(0);
    await waitQueueDrained(w.queues.send);
    expect(messagesTo(lost.email)).toHaveLength(1);
  });

  // Found by a review: a row handed over again kept its place at the head of the list, so rows
  // whose job exists but does not move could crowd out a lost one for good.
  it('a row handed over again goes to the back: a lost job behind rows whose job does not move is handed over at the next run', async () => {
    const sentOne = async (email: string) => {
      const id = await createDraft({ customer_email: email, amount: '1.00' });
      await send(id);
      let jobId = '';
      await waitUntil(async () => {
        const { rows } = await fx.api.pool.query<{ job_id: string }>(`select job_id from outbox where job_name = 'invoice.send' and payload->>'invoiceId' = $1 and enqueued_at is not null`, [id]);
        jobId = rows[0]?.job_id ?? '';
        return jobId !== '' && (await fx.api.queues.send.getJob(jobId)) !== undefined;
      }, 10_000);
      return { id, jobId };
    };
    // No worker runs: `stuck`'s job sits in the store without moving its delivery; `lost`'s is gone.
    const stuck = await sentOne('stuck-job@example.test');
    const lost = await sentOne('lost-behind@example.test');
    await fx.api.queues.send.remove(lost.jobId);
    for (const [x, age] of [[stuck, '3 hours'], [lost, '1 hour']] as const) {
      await fx.api.pool.query(`update deliveries set updated_at = now() - $2::interval where invoice_id = $1`, [x.id, age]);
      await fx.api.pool.query(`update outbox set enqueued_at = now() - $2::interval where job_name = 'invoice.send' and payload->>'invoiceId' = $1`, [x.id, age]);
    }
    const relay = createOutboxRelay(fx.api.pool, fx.api.queues);
    const handed: number[] = [];
    // A limit of one stands for the reconciler's 500 with that many rows like `stuck`.
    for (let run = 0; run < 4; run++) {
      handed.push(await handUnsentAgain(fx.api.pool, EMAIL_JOB_OF_DELIVERY, { olderThanMs: 30 * 60_000, maxAttempts: EMAIL_JOB_ATTEMPTS, limit: 1 }));
      await relay.relay();
    }
    expect(handed).toEqual([1, 1, 0, 0]);
    expect(await fx.api.queues.send.getJob(lost.jobId)).toBeDefined();
    await fx.api.queues.send.remove(stuck.jobId);
    await fx.api.queues.send.remove(lost.jobId);
  });

  // On the Postgres backend the queue lives in the database the send commits to: no such outage.
  it.runIf(inject('queueBackend') === 'redis')('Redis down at send time: the send answers 200, and the email goes out once Redis is back', async () => {
    // An API process whose Redis is unreachable.
    const api = await createApiRuntime(fx.env.config(fx.env.unreachableRedis(await freePort())), createLogger('silent'));
    cleanups.push(() => api.close());
    const email = 'redis-down@example.test';
    const created = await api.app.inject({ method: 'POST', url: '/v1/invoices', headers: { 'api-key': key() }, payload: { customer_email: email, amount: '3' } });
    const id = created.json().data.id;
    const started = Date.now();
    const res = await api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers: { 'api-key': key() } });
    expect(res.statusCode).toBe(200);
    expect(Date.now() - started).toBeLessThan(3_000);
    const pending = await fx.api.pool.query('select 1 from outbox where enqueued_at is null and payload->>$2 = $1', [id, 'invoiceId']);
    expect(pending.rowCount).toBe(1);
    // Redis "back": a worker on the real Redis relays the outbox row.
    await worker();
    await waitUntil(async () => messagesTo(email).length === 1, 10_000);
    await waitUntil(async () => (await deliveries(id))[0]?.status === 'sent');
    expect(messagesTo(email)).toHaveLength(1);
  });
});

describe('worker processes', () => {
  const workerEnv = (extra: Record<string, string> = {}) => workerProcessEnv(fx.env.config({ SMTP_URL: sink.url }), extra);

  function spawned(extra: Record<string, string> = {}): WorkerProcess {
    const p = spawnWorker(workerEnv(extra));
    cleanups.push(() => p.stop('SIGKILL'));
    return p;
  }

  it('two worker processes and 200 sends give 200 messages, one per invoice', async () => {
    const a = spawned();
    const b = spawned();
    await Promise.all([a, b].map((p) => p.waitForLine((l) => l.msg === 'worker started')));
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) ids.push(await createDraft({ customer_email: `bulk-${i}@example.test`, amount: '1.5' }));
    const before = sink.messages.length;
    for (const id of ids) await send(id);
    await sink.waitFor(before + 200, 60_000);
    await waitUntil(async () => {
      const { rows } = await fx.api.pool.query<{ n: number }>(
        `select count(*)::int as n from deliveries where invoice_id = any($1) and status = 'sent'`,
        [ids],
      );
      return rows[0].n === 200;
    }, 20_000);
    await waitQueueDrained(fx.api.queues.send);
    const bulk = sink.messages.filter((m) => to(m).some((t) => t?.startsWith('bulk-')));
    expect(bulk).toHaveLength(200);
    expect(new Set(bulk.flatMap(to)).size).toBe(200);
    expect(new Set(bulk.map((m) => m.messageId)).size).toBe(200);
    // Both processes took part.
    const workedBy = (p: WorkerProcess) => p.lines.filter((l) => l.includes('"job_name":"invoice.send"') && l.includes('job completed')).length;
    expect(workedBy(a)).toBeGreaterThan(0);
    expect(workedBy(b)).toBeGreaterThan(0);
    expect(await a.stop('SIGTERM')).toBe(0);
    expect(await b.stop('SIGTERM')).toBe(0);
  }, 120_000);

  it('a worker killed with SIGKILL mid-job loses nothing: the stalled job is retried and yields one email', async () => {
    const slow = await startSmtpSink({ rcptDelayMs: 3_000 });
    cleanups.push(() => slow.close());
    const env = { SMTP_URL: slow.url, SANDBOX_SMTP_URL: slow.url, WORKER_LOCK_DURATION_MS: '2000', WORKER_STALLED_INTERVAL_MS: '1000' };
    const victim = spawned(env);
    await victim.waitForLine((l) => l.msg === 'worker started');
    const email = 'crash@example.test';
    const id = await createDraft({ customer_email: email, amount: '9.99' });
    await send(id);
    // Kill it while it waits on the SMTP server (after RCPT, before DATA). A fresh worker's first
    // job starts its PDF render threads: on a loaded machine (the whole suite at once) that alone
    // took over 10 s once, so the waits are generous; they end as soon as the state is reached.
    const queue = fx.api.queues.send;
    await waitUntil(async () => (await queue.getActiveCount()) === 1, 30_000);
    await waitUntil(async () => slow.recipientsSeen.includes(email), 30_000, 20);
    victim.child.kill('SIGKILL');
    expect(slow.messages).toHaveLength(0);
    const rescuer = spawned(env);
    await waitUntil(async () => slow.messages.length === 1, 30_000);
    await waitUntil(async () => (await deliveries(id))[0]?.status === 'sent', 10_000);
    await waitQueueDrained(queue);
    expect(slow.messages.flatMap(to)).toEqual([email]);
    await rescuer.stop();
  }, 150_000);
});
