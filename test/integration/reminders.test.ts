// Reminders end to end with second-sized policies: HTTP send -> invoice.send -> job scheduler ->
// invoice.reminder -> SMTP, and invoice.due, against real Postgres, Redis and an SMTP server on
// loopback. Pay (test helper, or a bare SQL UPDATE caught by the LISTEN path), reminders off/on,
// the reminder timeline, and the rules of POST /reminders on drafts and closed invoices.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planReminderSlots, type ReminderSlot, reminderKindOf } from '../../src/domain/reminder-schedule.js';
import { loadEmailTemplates } from '../../src/mail/render-email.js';
import { formatDocumentDate } from '../../src/domain/invoice-format.js';
import { reminderSchedulerId } from '../../src/queue/reminder-schedulers.js';
import { dueJobId } from '../../src/queue/catalogue.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { sleep, startWorker, waitUntil } from '../helpers/worker.js';
import { apiClient, type ApiResponse, type HttpMethod, type JsonBody } from '../helpers/http.js';
import { SECOND_SIZED_REMINDERS } from '../helpers/reminder-policy.js';

const POLICY = { ...SECOND_SIZED_REMINDERS, RECONCILE_EVERY: 'PT2S' };
const TIME_ZONE = 'Europe/Paris'; // the fixture merchant's zone; customers here have none
/**
 * How far ahead invoices fall due: the invoice email and the first schedule land well before
 * due-3s, with room for a send slowed several times over on a loaded machine (the first slot is 9 s
 * after the draft; at 5 s a slow send missed it once in six runs, stop 42's session).
 */
const DUE_IN_MS = 12_000;

let fx: ApiFixture;
let sink: SmtpSink;
let worker: WorkerRuntime;
/** When each message reached the sink (parsed), by message object. */

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ ...POLICY, SMTP_URL: sink.url });
  worker = await startWorker(fx.env.config({ ...POLICY, SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '200' }));
  // Warm-up outside the timed tests: templates compiled, fonts parsed, SMTP pool open (an invoice
  // without a due date has no reminders).
  loadEmailTemplates();
  const warm = await call('POST', '/v1/invoices', { customer_email: 'warm-up@example.test', amount: '1' });
  expect((await call('POST', `/v1/invoices/${warm.body.data.id}/send`)).status).toBe(200);
  await waitUntil(async () => mailsTo('warm-up@example.test').length === 1, 20_000, 20);
});
afterAll(async () => {
  await worker?.close();
  await fx?.close();
  await sink?.close();
});

const policy = () => fx.env.config(POLICY).reminders;
const kindOf = (s: ReminderSlot) => reminderKindOf(s.phase);

/** A request with the merchant's sandbox key. */
const call = (method: HttpMethod, url: string, body?: unknown): Promise<ApiResponse> =>
  apiClient(() => fx.api.app).call(method, url, fx.merchant.keys.sandbox, body);

interface Sent {
  id: string;
  code: string;
  reference: string;
  email: string;
  dueAt: Date;
  plan: ReminderSlot[];
}

async function createDraft(email: string, dueAt: Date, extra: Record<string, unknown> = {}): Promise<JsonBody> {
  const res = await call('POST', '/v1/invoices', { customer_email: email, amount: '1234.5', due_at: dueAt.toISOString(), ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

/**
 * A draft due in DUE_IN_MS (or at `dueAt`), sent; resolves once the invoice email is out and the
 * schedule is set.
 */
async function createAndSend(email: string, dueAt = new Date(Date.now() + DUE_IN_MS)): Promise<Sent> {
  const draft = await createDraft(email, dueAt);
  const sent = await call('POST', `/v1/invoices/${draft.id}/send`);
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  const plan = planReminderSlots(policy(), dueAt, TIME_ZONE);
  // Every slot of the plan must still be ahead once the invoice is out: the wait has until then.
  await waitUntil(async () => (await scheduler(draft.id)) !== undefined, plan[0].at.getTime() - 300 - Date.now(), 20);
  expect(Date.now()).toBeLessThan(plan[0].at.getTime() - 300);
  return { id: draft.id, code: sent.body.data.code, reference: draft.reference, email, dueAt, plan };
}

const recipients = recipientsOf;
const mailsTo = (email: string) => sink.messages.filter((m) => recipients(m).includes(email));
const remindersTo = (email: string) => mailsTo(email).filter((m) => /^(Reminder|Overdue):/.test(m.subject ?? ''));

interface DeliveryRow {
  kind: string;
  slot_at: Date;
  status: string;
  attempt: number;
  message_id: string;
  sent_at: Date | null;
}
async function reminderRows(invoiceId: string): Promise<DeliveryRow[]> {
  const { rows } = await fx.api.pool.query<DeliveryRow>(
    `select kind, slot_at, status, attempt, message_id, sent_at from deliveries
     where invoice_id = $1 and kind in ('reminder_before', 'reminder_after') order by slot_at`,
    [invoiceId],
  );
  return rows;
}
/** Until the slot's delivery row says sent and its email has reached the sink (parsed). */
async function waitSlotSent(inv: Sent, slot: ReminderSlot, timeoutMs = slot.at.getTime() - Date.now() + 5_000): Promise<void> {
  await waitUntil(async () => {
    const row = (await reminderRows(inv.id)).find((r) => r.slot_at.getTime() === slot.at.getTime() && r.status === 'sent');
    return row !== undefined && mailsTo(inv.email).some((m) => m.messageId === row.message_id);
  }, timeoutMs, 20);
}
/** The invoice's reminder shard queue (several on the cluster run). */
const queueOf = (invoiceId: string) => fx.api.reminders.queueOf(invoiceId);

/** Until no reminder-queue job is running (on any shard): the jobs that fired so far have completed (recorded, schedule advanced). */
async function waitRemindersIdle(): Promise<void> {
  await waitUntil(async () => (await Promise.all(fx.api.queues.reminders.opened().map((q) => q.getActiveCount()))).every((n) => n === 0), 5_000, 20);
}

/**
 * An invoice with the same due date and so the same plan, whose reminders keep running: its slot
 * sent is the positive signal that the worker went past that instant, after which the absence of
 * another invoice's reminder of that instant means something.
 */
const witnessOf = (inv: Sent) => createAndSend(`witness-${inv.email}`, inv.dueAt);

/** Until the due-date job of the invoice has run (completed). */
async function waitDueJobDone(inv: Sent): Promise<void> {
  // By state, which both queue backends report: 'completed', or 'unknown' once removed.
  const id = dueJobId(inv.id, inv.dueAt);
  await waitUntil(async () => ['completed', 'unknown'].includes(await queueOf(inv.id).getJobState(id)), inv.dueAt.getTime() - Date.now() + 5_000, 20);
}
const scheduler = (invoiceId: string) => queueOf(invoiceId).getJobScheduler(reminderSchedulerId(invoiceId));
async function statusOf(invoiceId: string): Promise<string> {
  const { rows } = await fx.api.pool.query<{ status: string }>('select status from invoices where id = $1', [invoiceId]);
  return rows[0].status;
}

/** Samples the invoice's status every 20 ms: [query start, query end, status]. */
function watchStatus(invoiceId: string) {
  const samples: { start: number; end: number; status: string }[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const start = Date.now();
      const status = await statusOf(invoiceId);
      samples.push({ start, end: Date.now(), status });
      await sleep(20);
    }
  })();
  return { samples, stop: async () => { running = false; await loop; } };
}

describe('reminders on second-sized policies', () => {
  it('pre-due reminders before due, overdue at due, post-due up to the max: exactly the planned slots, each email complete', async () => {
    const inv = await createAndSend('lifecycle@example.test');
    const { plan, dueAt } = inv;
    expect(plan.map(kindOf)).toEqual(['reminder_before', 'reminder_before', 'reminder_before', 'reminder_after', 'reminder_after', 'reminder_after']);
    expect(plan.map((s) => s.at.getTime() - dueAt.getTime())).toEqual([-3000, -2000, -1000, 1000, 2000, 3000]);
    const status = watchStatus(inv.id);

    // The scheduler points at the first planned slot; the timeline lists the whole plan ahead.
    expect((await scheduler(inv.id))?.next).toBe(plan[0].at.getTime());
    const t0 = await call('GET', `/v1/invoices/${inv.id}/reminders`);
    expect(t0.status).toBe(200);
    expect(t0.body.data).toMatchObject({ invoice_id: inv.id, reminders_enabled: true, status: 'open', due_at: dueAt.toISOString(), time_zone: TIME_ZONE, past: [] });
    expect(t0.body.data.upcoming).toEqual(plan.map((s) => ({ kind: kindOf(s), scheduled_for: s.at.toISOString() })));

    // Mid-way: two reminders past, with their delivery status; the rest ahead. Upcoming is the
    // plan after the instant of the request: the next slot is a second later, which a loaded
    // machine can pass before the request is answered (then it is no longer listed ahead).
    await waitSlotSent(inv, plan[1]);
    const asked = Date.now();
    const t1 = (await call('GET', `/v1/invoices/${inv.id}/reminders`)).body.data;
    const answered = Date.now();
    expect(t1.past.slice(0, 2).map((p: JsonBody) => [p.kind, p.scheduled_for, p.status, p.attempt])).toEqual(
      plan.slice(0, 2).map((s) => [kindOf(s), s.at.toISOString(), 'sent', 1]),
    );
    const ahead = plan.length - t1.upcoming.length;
    expect(ahead).toBeGreaterThanOrEqual(2);
    expect(t1.upcoming).toEqual(plan.slice(ahead).map((s) => ({ kind: kindOf(s), scheduled_for: s.at.toISOString() })));
    // The cut is the request's instant: each slot listed was ahead when asked, the one before it due by the answer.
    if (ahead < plan.length) expect(plan[ahead].at.getTime()).toBeGreaterThan(asked);
    expect(plan[ahead - 1].at.getTime()).toBeLessThanOrEqual(answered);

    await waitSlotSent(inv, plan[plan.length - 1]);
    await waitRemindersIdle();
    await status.stop();

    // Postgres: one delivery per planned slot, at exactly the planned instant, each sent once.
    const rows = await reminderRows(inv.id);
    expect(rows.map((r) => [r.kind, r.slot_at.getTime(), r.status, r.attempt])).toEqual(plan.map((s) => [kindOf(s), s.at.getTime(), 'sent', 1]));

    // The sink: the invoice email, then one email per slot, arriving after its slot (within a second),
    // pre-due ones before the due date, each with its kind's subject.
    const all = mailsTo(inv.email);
    expect(all.map((m) => m.subject)).toEqual([
      `Invoice ${inv.code} from Acme Widgets Ltd`,
      ...plan.map((s) =>
        s.phase === 'before'
          ? `Reminder: invoice ${inv.code} is due on ${formatDocumentDate(dueAt.toISOString(), TIME_ZONE)}`
          : `Overdue: invoice ${inv.code} was due on ${formatDocumentDate(dueAt.toISOString(), TIME_ZONE)}`,
      ),
    ]);
    const reminders = all.slice(1);
    const lateness = reminders.map((m, i) => sink.arrivedAt.get(m)! - plan[i].at.getTime());
    console.info(`reminder arrival after its slot (ms): ${JSON.stringify(lateness)}`);
    for (const l of lateness) {
      expect(l).toBeGreaterThanOrEqual(0);
      expect(l).toBeLessThan(1_000);
    }
    for (const [i, m] of reminders.entries()) {
      if (plan[i].phase === 'before') expect(sink.arrivedAt.get(m)!).toBeLessThan(dueAt.getTime());
      else expect(sink.arrivedAt.get(m)!).toBeGreaterThan(dueAt.getTime());
    }
    // Each message is its delivery row's (Message-ID recorded before sending).
    expect(reminders.map((m) => m.messageId)).toEqual(rows.map((r) => r.message_id));

    // Content: amount, due date, pay link, and the invoice PDF attached.
    const dueDate = formatDocumentDate(dueAt.toISOString(), TIME_ZONE);
    for (const m of reminders) {
      expect(m.text).toContain('Amount: 1,234.50 USDC on base-sepolia');
      expect(m.text).toContain(`due on ${dueDate}`);
      expect(m.text).toContain(`Pay online: https://pay.example.test/${inv.reference}`);
      expect(m.html).toContain(`https://pay.example.test/${inv.reference}`);
      expect(m.attachments).toHaveLength(1);
      expect(m.attachments[0].contentType).toBe('application/pdf');
      expect(m.attachments[0].filename).toBe(`invoice-${inv.code}.pdf`);
    }
    for (const m of [reminders[0], reminders[reminders.length - 1]]) {
      const text = (await extractPdfText(m.attachments[0].content)).join('\n');
      expect(text).toContain(inv.code);
      expect(text).toContain('1,234.50');
    }

    // Overdue at due: never before it, and within half a second after it.
    const samples = status.samples;
    expect(samples.length).toBeGreaterThan(50);
    expect(samples.filter((s) => s.end < dueAt.getTime()).every((s) => s.status === 'open')).toBe(true);
    const firstOverdue = samples.find((s) => s.status === 'overdue');
    expect(firstOverdue).toBeDefined();
    expect(firstOverdue!.end).toBeGreaterThanOrEqual(dueAt.getTime());
    const lastOpen = samples.filter((s) => s.status === 'open').pop()!;
    console.info(`open until at least due${lastOpen.start - dueAt.getTime() >= 0 ? '+' : ''}${lastOpen.start - dueAt.getTime()} ms, overdue seen at due+${firstOverdue!.end - dueAt.getTime()} ms`);
    expect(firstOverdue!.end - dueAt.getTime()).toBeLessThan(1_500);
    expect(samples.slice(samples.indexOf(firstOverdue!)).every((s) => s.status === 'overdue')).toBe(true);

    // last_reminder_at is the last reminder's; the used-up schedule is gone from Redis.
    const got = (await call('GET', `/v1/invoices/${inv.id}`)).body.data;
    expect(got.status).toBe('overdue');
    expect(new Date(got.last_reminder_at).getTime()).toBeGreaterThanOrEqual(plan[plan.length - 1].at.getTime());
    expect(new Date(got.last_reminder_at).getTime()).toBeLessThanOrEqual(Date.now());
    expect(await scheduler(inv.id)).toBeUndefined();

    const t2 = (await call('GET', `/v1/invoices/${inv.id}/reminders`)).body.data;
    expect(t2.status).toBe('overdue');
    expect(t2.upcoming).toEqual([]);
    expect(t2.past).toHaveLength(plan.length);
    for (const [i, p] of t2.past.entries()) {
      expect(p).toMatchObject({ kind: kindOf(plan[i]), scheduled_for: plan[i].at.toISOString(), status: 'sent', attempt: 1, error: null });
      expect(new Date(p.sent_at).getTime()).toBeGreaterThanOrEqual(plan[i].at.getTime());
    }
  });

  it('paying through the test helper stops them: schedule gone at the response, no email after, never overdue', async () => {
    const inv = await createAndSend('pay-helper@example.test');
    const witness = await witnessOf(inv);
    const { plan, dueAt } = inv;
    await waitSlotSent(inv, plan[0]);
    expect(remindersTo(inv.email)).toHaveLength(1);

    const paid = await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`);
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(paid.body.data.status).toBe('paid');
    // Removed before the response returned.
    expect(await scheduler(inv.id)).toBeUndefined();

    // Past two more pre-due slots, the due date and the first post-due slot: the witness got
    // its reminder of the slot after those, and this invoice's due-date job has run.
    await waitSlotSent(witness, witness.plan[4]);
    await waitDueJobDone(inv);
    await waitRemindersIdle();
    expect(remindersTo(inv.email)).toHaveLength(1);
    expect((await reminderRows(inv.id)).map((r) => r.slot_at.getTime())).toEqual([plan[0].at.getTime()]);
    expect(await statusOf(inv.id)).toBe('paid'); // invoice.due ran at due and left it alone
    expect(await scheduler(inv.id)).toBeUndefined(); // and did not put it on the post-due phase
    expect(Date.now()).toBeGreaterThan(dueAt.getTime());

    // Reminders of a paid invoice are closed.
    for (const enabled of [true, false]) {
      const res = await call('POST', `/v1/invoices/${inv.id}/reminders`, { enabled });
      expect([res.status, res.body.error?.type, res.body.error?.code]).toEqual([400, 'invalid_request_error', 'invoice_reminders_closed']);
    }
  });

  it('voiding stops them: schedule gone at the response, no reminder of the next seconds sent, never overdue', async () => {
    const inv = await createAndSend('void@example.test');
    const witness = await witnessOf(inv);
    const { plan, dueAt } = inv;
    await waitSlotSent(inv, plan[0]);
    expect(remindersTo(inv.email)).toHaveLength(1);

    // The next reminder is due within a second.
    expect(plan[1].at.getTime() - Date.now()).toBeLessThan(1_500);
    const voided = await call('POST', `/v1/invoices/${inv.id}/void`);
    expect(voided.status, JSON.stringify(voided.body)).toBe(200);
    expect(voided.body.data.status).toBe('void');
    expect(await scheduler(inv.id)).toBeUndefined();

    // Past the slots that were due in the next seconds, the due date and the first post-due slot
    // (the witness's next reminder went out, this invoice's due-date job has run).
    await waitSlotSent(witness, witness.plan[4]);
    await waitDueJobDone(inv);
    await waitRemindersIdle();
    expect(remindersTo(inv.email)).toHaveLength(1);
    expect((await reminderRows(inv.id)).map((r) => r.slot_at.getTime())).toEqual([plan[0].at.getTime()]);
    expect(await statusOf(inv.id)).toBe('void'); // invoice.due left it alone
    expect(await scheduler(inv.id)).toBeUndefined();
    expect(Date.now()).toBeGreaterThan(dueAt.getTime());
    // Still readable; reminders of a void invoice are closed; a second void is refused.
    expect((await call('GET', `/v1/invoices/${inv.id}`)).body.data.status).toBe('void');
    const again = await call('POST', `/v1/invoices/${inv.id}/void`);
    expect([again.status, again.body.error?.code]).toEqual([400, 'invoice_not_voidable']);
    const rem = await call('POST', `/v1/invoices/${inv.id}/reminders`, { enabled: true });
    expect([rem.status, rem.body.error?.code]).toEqual([400, 'invoice_reminders_closed']);
  });

  it('paying by a direct SQL UPDATE stops them within a second (trigger -> NOTIFY -> worker), no email after it', async () => {
    const inv = await createAndSend('pay-sql@example.test');
    const witness = await witnessOf(inv);
    const { plan } = inv;
    await waitSlotSent(inv, plan[0]);
    // Nothing in flight: the first slot's jobs completed, the next slot is ~1 s away.
    await waitSlotSent(witness, witness.plan[0]);
    await waitRemindersIdle();
    expect(await scheduler(inv.id)).toBeDefined();
    const mailsBefore = remindersTo(inv.email).length;
    expect(mailsBefore).toBe(1);

    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
    const committed = performance.now();
    let gone = Infinity;
    while (performance.now() - committed < 3_000) {
      if ((await scheduler(inv.id)) === undefined) {
        gone = performance.now() - committed;
        break;
      }
      await sleep(20);
    }
    console.info(`SQL UPDATE paid -> scheduler gone: ${gone.toFixed(1)} ms`);
    expect(gone).toBeLessThan(1_000);

    await waitSlotSent(witness, witness.plan[4]);
    await waitDueJobDone(inv);
    await waitRemindersIdle();
    expect(remindersTo(inv.email)).toHaveLength(mailsBefore);
    expect((await reminderRows(inv.id)).map((r) => r.slot_at.getTime())).toEqual([plan[0].at.getTime()]);
    expect(await statusOf(inv.id)).toBe('paid');
    expect(await scheduler(inv.id)).toBeUndefined();
  });

  it('one SQL UPDATE paying several invoices stops them all (their notifications removed in a batch)', async () => {
    // Due in an hour: the schedules exist and nothing fires meanwhile, however slow the sends.
    const invoices: Sent[] = [];
    for (let i = 0; i < 6; i++) invoices.push(await createAndSend(`pay-many-${i}@example.test`, new Date(Date.now() + 3_600_000)));
    for (const inv of invoices) expect(await scheduler(inv.id)).toBeDefined();
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = any($1)`, [invoices.map((inv) => inv.id)]);
    // A state to wait for, generously: the bound is the machine's load, not the batching.
    await waitUntil(async () => (await Promise.all(invoices.map((inv) => scheduler(inv.id)))).every((s) => s === undefined), 20_000, 20);
    for (const inv of invoices) expect(await statusOf(inv.id)).toBe('paid');
  }, 60_000);

  it('off removes the schedule before the response; on resumes at the next slot with no burst of the missed ones', async () => {
    const inv = await createAndSend('off-on@example.test');
    const witness = await witnessOf(inv);
    const { plan, dueAt } = inv;
    // Off right after the first reminder, about a second before the next slot (on a loaded
    // machine the first one can be late enough for the next slot to fire before "off" is
    // answered: a slot at or before the answer may have gone out, none after it may).
    await waitSlotSent(inv, plan[0]);

    const off = await call('POST', `/v1/invoices/${inv.id}/reminders`, { enabled: false });
    const offAt = Date.now();
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body.data).toMatchObject({ status: 'open', reminders_enabled: false });
    expect(await scheduler(inv.id)).toBeUndefined();
    const offTimeline = (await call('GET', `/v1/invoices/${inv.id}/reminders`)).body.data;
    expect(offTimeline).toMatchObject({ reminders_enabled: false, upcoming: [] });
    const past = offTimeline.past.map((p: JsonBody) => Date.parse(p.scheduled_for));
    expect(past[0]).toBe(plan[0].at.getTime());
    for (const at of past.slice(1)) expect(at, 'a slot after "off" was answered').toBeLessThanOrEqual(offAt);

    // plan[1] passes while off (the witness got its reminder of it).
    await waitSlotSent(witness, witness.plan[1]);
    await waitRemindersIdle();
    const afterFirst = (await reminderRows(inv.id)).filter((r) => r.slot_at.getTime() > plan[0].at.getTime());
    // Each went out before "off" was answered: the send holds the invoice's row (FOR SHARE), which "off" updates.
    for (const r of afterFirst) expect(r.sent_at?.getTime() ?? Infinity, `slot ${r.slot_at.toISOString()} sent after "off" was answered`).toBeLessThanOrEqual(offAt);
    const firedBeforeOff = afterFirst.map((r) => r.slot_at.getTime());
    const askedOn = Date.now();
    const on = await call('POST', `/v1/invoices/${inv.id}/reminders`, { enabled: true });
    const onAt = Date.now();
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(on.body.data.reminders_enabled).toBe(true);
    // It resumes at the first slot after the request: plan[2] on an idle machine, 1 s after
    // plan[1]; a loaded one can pass plan[2] too before the request is answered. Each slot
    // passed while off is skipped, none caught up.
    const resume = plan.findIndex((s) => s.at.getTime() > askedOn);
    expect(resume).toBeGreaterThanOrEqual(2);
    const next = (await scheduler(inv.id))?.next;
    expect(next === plan[resume].at.getTime() || (next === plan[resume + 1]?.at.getTime() && plan[resume].at.getTime() <= onAt), `next ${next}`).toBe(true);
    const skipped = next === plan[resume].at.getTime() ? resume : resume + 1;

    // No burst: every email below arrives at or after its own slot, and plan[1] has none.
    await waitSlotSent(inv, plan[plan.length - 1]);
    await waitRemindersIdle();
    const expected = plan.filter((s, i) => i === 0 || i >= skipped || firedBeforeOff.includes(s.at.getTime()));
    const rows = await reminderRows(inv.id);
    expect(rows.map((r) => [r.kind, r.slot_at.getTime(), r.status])).toEqual(expected.map((s) => [kindOf(s), s.at.getTime(), 'sent']));
    const mails = remindersTo(inv.email);
    expect(mails).toHaveLength(expected.length);
    for (const [i, m] of mails.entries()) {
      const at = sink.arrivedAt.get(m)!;
      expect(at).toBeGreaterThanOrEqual(expected[i].at.getTime());
      expect(at - expected[i].at.getTime()).toBeLessThan(1_000);
      if (i > 0 && !firedBeforeOff.includes(expected[i].at.getTime())) expect(at).toBeGreaterThan(onAt);
    }
    expect(await statusOf(inv.id)).toBe('overdue');
    expect(dueAt.getTime()).toBeLessThan(Date.now());
  });

  it('on a draft only the flag changes; sending it then plans no reminders until they are turned on', async () => {
    const dueAt = new Date(Date.now() + 3_600_000);
    const draft = await createDraft('draft-flag@example.test', dueAt, { memo: 'draft memo' });
    const off = await call('POST', `/v1/invoices/${draft.id}/reminders`, { enabled: false });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    const { reminders_enabled: before, updated_at: _u1, ...restBefore } = draft;
    const { reminders_enabled: after, updated_at: _u2, ...restAfter } = off.body.data;
    expect([before, after]).toEqual([true, false]);
    expect(restAfter).toEqual(restBefore);
    expect(restAfter.status).toBe('draft');
    expect(await scheduler(draft.id)).toBeUndefined();
    expect(await queueOf(draft.id).getJob(dueJobId(draft.id, dueAt))).toBeUndefined();
    const timeline = (await call('GET', `/v1/invoices/${draft.id}/reminders`)).body.data;
    expect(timeline).toMatchObject({ status: 'draft', reminders_enabled: false, past: [], upcoming: [] });

    // Sent with reminders off: the invoice email and the due-date job, no schedule.
    expect((await call('POST', `/v1/invoices/${draft.id}/send`)).status).toBe(200);
    await waitUntil(async () => (await queueOf(draft.id).getJob(dueJobId(draft.id, dueAt))) !== undefined, 5_000, 20);
    await waitUntil(async () => mailsTo('draft-flag@example.test').length === 1, 5_000, 20);
    expect(await scheduler(draft.id)).toBeUndefined();

    // On: scheduled at the first slot; off again: gone by the time the response is read.
    const plan = planReminderSlots(policy(), dueAt, TIME_ZONE);
    expect((await call('POST', `/v1/invoices/${draft.id}/reminders`, { enabled: true })).status).toBe(200);
    expect((await scheduler(draft.id))?.next).toBe(plan[0].at.getTime());
    expect((await call('POST', `/v1/invoices/${draft.id}/reminders`, { enabled: false })).status).toBe(200);
    expect(await scheduler(draft.id)).toBeUndefined();

    // A void invoice (set in SQL) is closed too.
    await fx.api.pool.query(`update invoices set status = 'void' where id = $1`, [draft.id]);
    const res = await call('POST', `/v1/invoices/${draft.id}/reminders`, { enabled: true });
    expect([res.status, res.body.error?.code]).toEqual([400, 'invoice_reminders_closed']);
    expect(await scheduler(draft.id)).toBeUndefined();
  });
});
