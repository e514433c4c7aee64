// A deployment keeps to its own: its Redis prefix (claimed for its database), its reminder
// schedulers (the reconciler never removes another database's), and sandbox mail (captured,
// never sent to SMTP_URL, each delivery recording where its message went).
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { jobHandlers } from '../../jobs/index.js';
import { createLogger } from '../../src/log.js';
import { prefixClaimKey } from '../../src/queue/prefix-claim.js';
import { reminderShardOf } from '../../src/queue/reminder-shards.js';
import { StartupError } from '../../src/runtime/startup-error.js';
import { createWorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { Redis } from 'ioredis';
import { createTestDatabase, startApiFixture, type ApiFixture } from '../helpers/context.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { spawnWorker, startWorker, waitUntil, workerProcessEnv } from '../helpers/worker.js';

let fx: ApiFixture;
let live: SmtpSink;
let sandbox: SmtpSink;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  live = await startSmtpSink();
  sandbox = await startSmtpSink();
  fx = await startApiFixture();
});
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  await fx?.close();
  await live?.close();
  await sandbox?.close();
});

const recipients = (sink: SmtpSink) => sink.messages.flatMap(recipientsOf);

async function sendInvoice(key: string, email: string): Promise<string> {
  const headers = { 'api-key': key };
  const created = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers, payload: { customer_email: email, amount: '5' } });
  expect(created.statusCode, created.body).toBe(200);
  const id = created.json().data.id as string;
  const sent = await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers });
  expect(sent.statusCode, sent.body).toBe(200);
  return id;
}

async function delivery(invoiceId: string) {
  const { rows } = await fx.api.pool.query<{ status: string; transport: string | null; destination: string | null }>(
    `select status, transport, destination from deliveries where invoice_id = $1 and kind = 'invoice'`,
    [invoiceId],
  );
  return rows[0];
}

describe('one Redis prefix, one database', () => {
  // Redis only: the Postgres backend's counterpart (the bullmq schema's claim) is in queue-backend-postgres.test.ts.
  it.runIf(inject('queueBackend') === 'redis')('a worker of another database refuses the claimed prefix, naming REDIS_PREFIX; the owner starts again', async () => {
    const first = await startWorker(fx.env.config());
    cleanups.push(() => first.close());
    const redis = new Redis(fx.env.redisUrl!);
    cleanups.push(async () => redis.disconnect());
    const marker = JSON.parse((await redis.get(prefixClaimKey(fx.env.redisPrefix)))!) as { database_id: string };
    expect(marker.database_id).toMatch(/^[0-9a-f-]{36}$/);

    const other = await createTestDatabase();
    cleanups.push(() => other.drop());
    const otherConfig = fx.env.config({ DATABASE_URL: other.url });
    const refused = await createWorkerRuntime(otherConfig, createLogger('silent'), jobHandlers).then(
      (w) => w.close().then(() => null),
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(StartupError);
    expect((refused as StartupError).variable).toBe('REDIS_PREFIX');

    // As a process: exit 1, one line naming REDIS_PREFIX, no stack trace.
    const p = spawnWorker(workerProcessEnv(otherConfig, { LOG_LEVEL: 'warn' }));
    cleanups.push(() => p.stop('SIGKILL'));
    expect(await p.exited).toBe(1);
    const stderr = p.lines.filter((l) => l.startsWith('stderr: ')).map((l) => l.slice('stderr: '.length)).join('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('REDIS_PREFIX');
    expect(stderr).not.toMatch(/\n\s+at /);
    // The marker still names the first database, which starts again fine.
    expect(JSON.parse((await redis.get(prefixClaimKey(fx.env.redisPrefix)))!)).toMatchObject({ database_id: marker.database_id });
    const again = await startWorker(fx.env.config());
    cleanups.push(() => again.close());
  }, 60_000);

  it('the reconciler never removes a scheduler for an invoice its database does not have', async () => {
    const worker = await startWorker(fx.env.config());
    cleanups.push(() => worker.close());
    // A scheduler left under this prefix by another deployment (before prefixes were claimed).
    const foreign = 'inv_of_another_deployment';
    const shardQueue = worker.reminders.queueOf(foreign);
    const schedulers = worker.reminders.schedulersOf(reminderShardOf(foreign, worker.reminders.shards.layout().own));
    await schedulers.schedule({ id: foreign, dueAt: new Date(Date.now() + 30 * 86_400_000), timeZone: 'UTC' }, new Date());
    expect(await shardQueue.getJobScheduler(`rem-${foreign}`)).toBeTruthy();
    const report = await worker.reminders.reconcile();
    expect(report.schedulersRemoved).toBe(0);
    expect(report.schedulersForeign).toBe(1);
    expect(await shardQueue.getJobScheduler(`rem-${foreign}`)).toBeTruthy();
    await schedulers.cancel(foreign);
  });
});

describe('sandbox mail is captured', () => {
  it('without SANDBOX_SMTP_URL sandbox mail is an .eml file in MAIL_OUTBOX_DIR, never sent to SMTP_URL; live mail goes to SMTP_URL', async () => {
    const outbox = await mkdtemp(path.join(tmpdir(), 'sandbox-outbox-'));
    cleanups.push(() => rm(outbox, { recursive: true, force: true }));
    const worker = await startWorker(fx.env.config({ SMTP_URL: live.url, SANDBOX_SMTP_URL: '', MAIL_OUTBOX_DIR: outbox, OUTBOX_RELAY_INTERVAL_MS: '100' }));
    cleanups.push(() => worker.close());

    const sandboxId = await sendInvoice(fx.merchant.keys.sandbox, 'stranger@example.test');
    await waitUntil(async () => (await delivery(sandboxId))?.status === 'sent', 20_000);
    const files = await readdir(outbox);
    expect(files).toHaveLength(1);
    // Named after what it is, for a person looking in the folder: the invoice's code and the kind.
    const { rows } = await fx.api.pool.query<{ code: string; id: string }>(
      `select i.code, d.id from invoices i join deliveries d on d.invoice_id = i.id and d.kind = 'invoice' where i.id = $1`,
      [sandboxId],
    );
    expect(files[0]).toBe(`${rows[0].code}-invoice-${rows[0].id}.eml`);
    expect(files[0]).toMatch(/^TEST-INV-\d{6}-invoice-dlv_[A-Za-z0-9]+\.eml$/);
    expect(await readFile(path.join(outbox, files[0]), 'utf8')).toContain('stranger@example.test');
    expect(await delivery(sandboxId)).toMatchObject({ transport: 'outbox', destination: path.join(outbox, files[0]) });

    const liveId = await sendInvoice(fx.merchant.keys.live, 'customer@example.test');
    await waitUntil(async () => (await delivery(liveId))?.status === 'sent', 20_000);
    await live.waitFor(1);
    expect(recipients(live)).toEqual(['customer@example.test']);
    expect(await delivery(liveId)).toMatchObject({ transport: 'smtp', destination: `smtp://127.0.0.1:${live.port}` });
    expect(await readdir(outbox)).toHaveLength(1);
  }, 60_000);

  it('with SANDBOX_SMTP_URL sandbox mail goes to that server only', async () => {
    const worker = await startWorker(fx.env.config({ SMTP_URL: live.url, SANDBOX_SMTP_URL: sandbox.url, OUTBOX_RELAY_INTERVAL_MS: '100' }));
    cleanups.push(() => worker.close());
    const before = recipients(live).length;
    const id = await sendInvoice(fx.merchant.keys.sandbox, 'captured@example.test');
    await waitUntil(async () => (await delivery(id))?.status === 'sent', 20_000);
    await sandbox.waitFor(1);
    expect(recipients(sandbox)).toContain('captured@example.test');
    expect(recipients(live)).toHaveLength(before);
    expect(recipients(live)).not.toContain('captured@example.test');
    expect(await delivery(id)).toMatchObject({ transport: 'sandbox_smtp', destination: `smtp://127.0.0.1:${sandbox.port}` });
  }, 60_000);
});
