// Changing REMINDER_SHARDS on a running deployment: schedulers placed under the old count are
// moved by the reconciler to their shard under the new one; every slot goes out once; the old
// count's membership is forgotten once its extra shard is drained. Real Postgres, Redis (or the
// local cluster, in the cluster project) and SMTP on loopback, second-sized policies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planReminderSlots, type ReminderSlot } from '../../src/domain/reminder-schedule.js';
import { reminderSchedulerId } from '../../src/queue/reminder-schedulers.js';
import { reminderShardOf } from '../../src/queue/reminder-shards.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type ApiResponse, type HttpMethod } from '../helpers/http.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

// Before due: every 4 s from 16 s before; after due: two, 3 s apart. Steps of seconds, not
// fractions: a worker late by more than a step skips to the next slot (no burst), by design.
const POLICY = {
  REMINDERS_BEFORE_START: 'PT16S',
  REMINDERS_BEFORE_EVERY: 'PT4S',
  REMINDERS_AFTER_START: 'PT3S',
  REMINDERS_AFTER_EVERY: 'PT3S',
  REMINDERS_AFTER_MAX: '2',
  RECONCILE_EVERY: 'PT1S',
};
const TIME_ZONE = 'Europe/Paris';
const OLD = 4;
const NEW = 3;

let fx: ApiFixture;
let sink: SmtpSink;
let workers: WorkerRuntime[] = [];

beforeAll(async () => {
  sink = await startSmtpSink();
  // The API already runs with the new count (in a rollout it restarts too).
  fx = await startApiFixture({ ...POLICY, SMTP_URL: sink.url, REMINDER_SHARDS: String(NEW) });
});
afterAll(async () => {
  for (const w of workers) await w.close().catch(() => undefined);
  await fx?.close();
  await sink?.close();
});

const call = (method: HttpMethod, url: string, body?: unknown): Promise<ApiResponse> =>
  apiClient(() => fx.api.app).call(method, url, fx.merchant.keys.sandbox, body);
const recipients = recipientsOf;
const mailsTo = (email: string) => sink.messages.filter((m) => recipients(m).includes(email));

/** The shards (0..OLD-1) that hold a scheduler of this invoice. */
async function shardsHolding(invoiceId: string): Promise<number[]> {
  const found: number[] = [];
  for (let s = 0; s < OLD; s++) if ((await fx.api.queues.reminders.shard(s).getJobScheduler(reminderSchedulerId(invoiceId))) !== undefined) found.push(s);
  return found;
}

describe('changing REMINDER_SHARDS', () => {
  it(`${OLD} -> ${NEW}: the reconciler moves the schedulers, every slot goes out once, the old count is forgotten once drained`, async () => {
    const workerConfig = (shards: number) => fx.env.config({ ...POLICY, SMTP_URL: sink.url, REMINDER_SHARDS: String(shards), OUTBOX_RELAY_INTERVAL_MS: '200' });
    const oldWorker = await startWorker(workerConfig(OLD));
    workers.push(oldWorker);

    // Invoices until a few live in the shard that goes away (OLD - 1).
    const dueAt = new Date(Date.now() + 36_000);
    const invoices: { id: string; email: string }[] = [];
    while (invoices.filter((inv) => reminderShardOf(inv.id, OLD) === OLD - 1).length < 3 && invoices.length < 40) {
      const email = `shard-${invoices.length}@example.test`;
      const created = await call('POST', '/v1/invoices', { customer_email: email, amount: '5', due_at: dueAt.toISOString(), customer_time_zone: TIME_ZONE });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      expect((await call('POST', `/v1/invoices/${created.body.data.id}/send`)).status).toBe(200);
      invoices.push({ id: created.body.data.id, email });
    }
    const moving = invoices.filter((inv) => reminderShardOf(inv.id, OLD) !== reminderShardOf(inv.id, NEW));
    expect(moving.length).toBeGreaterThanOrEqual(3);

    // The old worker sent the invoices and placed each schedule under its count.
    await waitUntil(async () => {
      for (const inv of invoices) if ((await shardsHolding(inv.id)).join() !== String(reminderShardOf(inv.id, OLD))) return false;
      return true;
    }, 20_000, 100);

    // Rollout: the old worker stops (its membership goes stale at once), a new one starts.
    await oldWorker.close();
    workers = workers.filter((w) => w !== oldWorker);
    const movedAt = Date.now();
    const newWorker = await startWorker(workerConfig(NEW));
    workers.push(newWorker);

    // Its reconciler moves every misplaced schedule: each invoice ends on its shard under NEW, alone.
    await waitUntil(async () => {
      for (const inv of invoices) if ((await shardsHolding(inv.id)).join() !== String(reminderShardOf(inv.id, NEW))) return false;
      return true;
    }, 15_000, 100);
    const settledAt = Date.now();

    // Every planned slot until due (the phase the move happened in) goes out, none twice; the
    // state to wait for: every invoice overdue with its before-phase slots sent.
    const plan: ReminderSlot[] = planReminderSlots(fx.env.config(POLICY).reminders, dueAt, TIME_ZONE);
    const before = plan.filter((s) => s.phase === 'before' && s.at.getTime() > settledAt + 500);
    expect(before.length).toBeGreaterThanOrEqual(1);
    const rowsOf = async (id: string) =>
      (
        await fx.api.pool.query<{ slot_at: Date; status: string; message_id: string }>(
          `select slot_at, status, message_id from deliveries where invoice_id = $1 and kind <> 'invoice' order by slot_at`,
          [id],
        )
      ).rows;
    await waitUntil(async () => {
      for (const inv of invoices) {
        const sent = (await rowsOf(inv.id)).filter((r) => r.status === 'sent').map((r) => r.slot_at.getTime());
        if (!before.every((s) => sent.includes(s.at.getTime()))) return false;
        const { rows } = await fx.api.pool.query<{ status: string }>('select status from invoices where id = $1', [inv.id]);
        if (rows[0].status !== 'overdue') return false;
      }
      return true;
    }, dueAt.getTime() - Date.now() + 20_000, 200);

    const planned = plan.map((s) => s.at.getTime());
    for (const inv of invoices) {
      const rows = await rowsOf(inv.id);
      const slots = rows.map((r) => r.slot_at.getTime());
      expect(new Set(slots).size, `${inv.id}: a slot twice`).toBe(slots.length);
      for (const t of slots) expect(planned).toContain(t);
      // One email per sent row (plus the invoice email itself), whatever shard sent it.
      const sentRows = rows.filter((r) => r.status === 'sent');
      const reminders = mailsTo(inv.email).filter((m) => m.messageId !== undefined && sentRows.some((r) => r.message_id === m.messageId));
      expect(reminders).toHaveLength(sentRows.length);
    }
    expect(movedAt).toBeLessThan(Math.min(...before.map((s) => s.at.getTime())));

    // The old count's extra shard held the due-date jobs of its invoices; once they ran, the
    // reconciler forgets the old membership.
    await waitUntil(async () => {
      const { rows } = await fx.api.pool.query<{ n: number }>('select count(*)::int as n from reminder_shard_members where shards = $1', [OLD]);
      return rows[0].n === 0;
    }, 20_000, 200);
    expect((await newWorker.reminders.shards.refresh()).consumed).toBe(NEW);
  }, 120_000);
});
