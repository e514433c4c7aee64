// A change of the reminder policy between two worker starts (REMINDERS_* restart): open invoices
// move to the new policy for their future slots at the next reconcile (the new worker's start),
// the timeline's next slot is the instant the reminder then arrives, no slot already sent goes out
// again, nothing bursts, and the worker says at start which policy it runs.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planReminderSlots, reminderKindOf } from '../../src/domain/reminder-schedule.js';
import { createLogger } from '../../src/log.js';
import { reminderSchedulerId } from '../../src/queue/reminder-schedulers.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { jobHandlers } from '../../jobs/index.js';
import { createWorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

// Old plan: due-12s, due-9s, due-6s, due-3s, then due+2s, due+5s. Its first slot comes 8 s before
// the new plan's first, the time the test has to stop one worker and start the other.
const POLICY_A = {
  REMINDERS_BEFORE_START: 'PT12S',
  REMINDERS_BEFORE_EVERY: 'PT3S',
  REMINDERS_AFTER_START: 'PT2S',
  REMINDERS_AFTER_EVERY: 'PT3S',
  REMINDERS_AFTER_MAX: '2',
};
// New plan: due-4s, then due+1s, due+4s: no instant in common with the old one.
const POLICY_B = {
  REMINDERS_BEFORE_START: 'PT4S',
  REMINDERS_BEFORE_EVERY: 'PT4S',
  REMINDERS_AFTER_START: 'PT1S',
  REMINDERS_AFTER_EVERY: 'PT3S',
  REMINDERS_AFTER_MAX: '2',
};
const TIME_ZONE = 'Europe/Paris';

let fx: ApiFixture;
let apiB: ApiRuntime;
let sink: SmtpSink;
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ ...POLICY_A, SMTP_URL: sink.url });
});
afterAll(async () => {
  while (closers.length) await closers.pop()!().catch(() => undefined);
  await apiB?.close();
  await fx?.close();
  await sink?.close();
});

const to = recipientsOf;
const remindersTo = (email: string) => sink.messages.filter((m) => to(m).includes(email) && /^(Reminder|Overdue):/.test(m.subject ?? ''));

async function reminderRows(invoiceId: string) {
  const { rows } = await fx.api.pool.query<{ kind: string; slot_at: Date; status: string; message_id: string }>(
    `select kind, slot_at, status, message_id from deliveries where invoice_id = $1 and kind in ('reminder_before', 'reminder_after') order by slot_at`,
    [invoiceId],
  );
  return rows;
}

describe('reminder policy change between two worker starts', () => {
  it('moves open invoices to the new policy for future slots: the timeline is what fires, no resend, no burst', async () => {
    const lines: Record<string, unknown>[] = [];
    const capture = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const workerA = await startWorker(fx.env.config({ ...POLICY_A, SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100' }));
    const email = 'policy@example.test';
    const dueAt = new Date(Date.now() + 19_000);
    const key = fx.merchant.keys.sandbox;
    const created = await apiClient(fx.api.app).post('/v1/invoices', key, { customer_email: email, amount: '10', due_at: dueAt.toISOString() });
    const id = created.body.data.id as string;
    expect((await apiClient(fx.api.app).post(`/v1/invoices/${id}/send`, key)).status).toBe(200);
    const planA = planReminderSlots(fx.env.config(POLICY_A).reminders, dueAt, TIME_ZONE);
    // The first slot of the old plan goes out under the old worker...
    await waitUntil(async () => (await reminderRows(id)).some((r) => r.status === 'sent'), planA[0].at.getTime() - Date.now() + 3_000, 20);
    await workerA.close();
    const sentUnderA = (await reminderRows(id)).filter((r) => r.status === 'sent');
    // Old-plan slots only (one, or two on a slow machine), and the old plan has later ones left.
    for (const r of sentUnderA) expect(planA.slice(0, 2).map((p) => p.at.getTime())).toContain(r.slot_at.getTime());

    // ...then everything restarts with the new policy: an API and a worker reading POLICY_B.
    const configB = fx.env.config({ ...POLICY_B, SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100' });
    apiB = await createApiRuntime(configB, createLogger('silent'));
    const workerB = await createWorkerRuntime(configB, createLogger('info', capture), jobHandlers);
    closers.push(() => workerB.close());
    const started = lines.find((l) => l.msg === 'worker started');
    expect(started?.reminder_policy).toEqual({
      before_start: 'PT4S',
      before_every: 'PT4S',
      after_start: 'PT1S',
      after_every: 'PT3S',
      after_max: 2,
      local_hour: 9,
    });

    // The start's reconcile moves the schedule; from then on the timeline's next slot is the
    // scheduler's next firing.
    const scheduler = () => apiB.reminders.queueOf(id).getJobScheduler(reminderSchedulerId(id));
    const timeline = async () => (await apiClient(apiB.app).get(`/v1/invoices/${id}/reminders`, key)).body.data as JsonBody;
    await waitUntil(async () => {
      const [s, t] = await Promise.all([scheduler(), timeline()]);
      return s !== undefined && t.upcoming.length > 0 && s.next === Date.parse(t.upcoming[0].scheduled_for);
    }, 20_000, 20);
    const before = await timeline();
    const planB = planReminderSlots(configB.reminders, dueAt, TIME_ZONE).filter((s) => s.at.getTime() > Date.now());
    expect(before.upcoming).toEqual(planB.map((s) => ({ kind: reminderKindOf(s.phase), scheduled_for: s.at.toISOString() })));
    // Moved by the start's reconcile, or (had an old-plan slot come due first) by the reminder
    // job itself, which re-plans instead of sending it.
    await waitUntil(async () => lines.some((l) => l.msg === 'reminders reconciled at start'), 20_000, 20);
    expect(
      lines.some((l) => (l.msg === 'reminders reconciled at start' && l.schedulersMoved === 1) || l.msg === 'reminder planned under another policy: re-planned, not sent'),
    ).toBe(true);

    // Each listed slot arrives at its instant, and nothing else does.
    const next = before.upcoming[0];
    await waitUntil(async () => (await reminderRows(id)).some((r) => r.slot_at.toISOString() === next.scheduled_for && r.status === 'sent'), 8_000, 20);
    const last = Date.parse(before.upcoming[before.upcoming.length - 1].scheduled_for);
    await waitUntil(async () => (await reminderRows(id)).filter((r) => r.status === 'sent').length === sentUnderA.length + before.upcoming.length, last - Date.now() + 4_000, 50);
    // Nothing else can fire once the invoice's scheduler is gone (its last slot done) and no job of
    // it waits or runs: an old-plan slot left behind (the old plan ends a second after the new)
    // would keep one of them.
    const queue = apiB.reminders.queueOf(id);
    const mine = `repeat:${reminderSchedulerId(id)}:`;
    await waitUntil(async () => {
      const [s, jobs] = await Promise.all([scheduler(), queue.getJobs(['delayed', 'waiting', 'prioritized', 'active'])]);
      return s === undefined && !jobs.some((j) => (j.id ?? '').startsWith(mine));
    }, 20_000, 50);
    // Sent rows: an old-plan job the stopped worker had in hand when it stopped may be left pending.
    // On a loaded machine the new plan's first slot may already have gone out by the time the test
    // read the timeline: what was sent after the switch is a tail of the new plan that holds
    // every slot the timeline listed.
    const rows = (await reminderRows(id)).filter((r) => r.status === 'sent');
    expect(rows.slice(0, sentUnderA.length).map((r) => [r.kind, r.slot_at.toISOString()])).toEqual(
      sentUnderA.map((r) => [r.kind, r.slot_at.toISOString()]),
    );
    const afterSwitch = rows.slice(sentUnderA.length).map((r) => [r.kind, r.slot_at.toISOString()]);
    const planBAll = planReminderSlots(configB.reminders, dueAt, TIME_ZONE).map((s) => [reminderKindOf(s.phase), s.at.toISOString()]);
    expect(afterSwitch).toEqual(planBAll.slice(planBAll.length - afterSwitch.length));
    expect(afterSwitch.slice(afterSwitch.length - before.upcoming.length)).toEqual(before.upcoming.map((u: JsonBody) => [u.kind, u.scheduled_for]));
    // One email per row (no slot sent twice), each at or after its planned instant.
    const mails = remindersTo(email);
    expect(mails).toHaveLength(rows.length);
    for (const row of rows.slice(sentUnderA.length)) {
      const mail = mails.find((m) => m.messageId === row.message_id)!;
      expect(sink.arrivedAt.get(mail)!).toBeGreaterThanOrEqual(row.slot_at.getTime());
    }
    // The old plan's later slots never fired.
    for (const old of planA.slice(sentUnderA.length)) expect(rows.some((r) => r.slot_at.getTime() === old.at.getTime())).toBe(false);
    expect((await timeline()).upcoming).toEqual([]);
  }, 60_000);
});
