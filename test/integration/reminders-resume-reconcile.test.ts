// Reminders turned off, then on again (invoices.reminders_resumed_at), and the schedule "on" made
// lost before its first slot (Redis unreachable at "on": the route leaves the repair to the
// reconciler; or a FLUSHALL). The reconciler plans again from just after the last recorded
// reminder, but never from before reminders_resumed_at: a catch-up of a slot that passed while
// reminders were off would be refused by the send's guard, and the slots owed after "on" that the
// outage made miss would never go out (a review of 44ccbbb).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockIfRemindersRun } from '../../src/db/reminders.js';
import { upsertDelivery } from '../../src/db/deliveries.js';
import { newId } from '../../src/domain/ids.js';
import { withTransaction } from '../../src/db/pool.js';
import { plannedInstantOf, reminderSchedulerId } from '../../src/queue/reminder-schedulers.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type ApiResponse, type HttpMethod } from '../helpers/http.js';
import { SECOND_SIZED_REMINDERS } from '../helpers/reminder-policy.js';

const POLICY = { ...SECOND_SIZED_REMINDERS, RECONCILE_EVERY: 'PT1H' };

let fx: ApiFixture;
beforeAll(async () => {
  fx = await startApiFixture({ ...POLICY });
}, 60_000);
afterAll(async () => {
  await fx?.close();
});
const call = (method: HttpMethod, url: string, body?: unknown): Promise<ApiResponse> => apiClient(() => fx.api.app).call(method, url, fx.merchant.keys.sandbox, body);
const sleepUntil = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

describe('reminders off, on, then the schedule lost', () => {
  it("the reconciler's catch-up is a slot reminders_resumed_at lets through", async () => {
    const t0 = Date.now();
    const dueAt = new Date(t0 + 6_000);
    const created = await call('POST', '/v1/invoices', { customer_email: 'r@example.test', amount: '42', due_at: dueAt.toISOString() });
    expect(created.status, created.raw).toBe(200);
    const id = created.body.data.id as string;
    expect((await call('POST', `/v1/invoices/${id}/send`)).status).toBe(200);
    // The invoice email went out (no worker here): reminders may run.
    const marked = await fx.api.pool.query(`update deliveries set status = 'sent' where invoice_id = $1 and kind = 'invoice'`, [id]);
    if (marked.rowCount === 0) {
      const d = await upsertDelivery(fx.api.pool, { id: newId('dlv'), invoiceId: id, kind: 'invoice', slotAt: new Date(), messageId: `<${newId('dlv')}@example.test>` });
      await fx.api.pool.query(`update deliveries set status = 'sent' where id = $1`, [d.id]);
    }
    // Off at once; due-3s (t0+3s) passes while off; on again at t0+3.5s.
    expect((await call('POST', `/v1/invoices/${id}/reminders`, { enabled: false })).status).toBe(200);
    await sleepUntil(t0 + 3_500);
    expect((await call('POST', `/v1/invoices/${id}/reminders`, { enabled: true })).status).toBe(200);
    const resumedAt = (await fx.api.pool.query<{ t: Date }>('select reminders_resumed_at as t from invoices where id = $1', [id])).rows[0].t;
    // The schedule "on" made is lost (Redis down at "on", or flushed): slots due-2s and due-1s, owed, pass unsent.
    await fx.api.reminders.stop(id);
    await sleepUntil(t0 + 5_300);
    await fx.api.reminders.reconcile();
    const queue = fx.api.reminders.queueOf(id);
    const jobs = (await queue.getJobs(['delayed', 'waiting', 'prioritized'])).filter((j) => j.id?.startsWith(`repeat:${reminderSchedulerId(id)}:`));
    expect(jobs.length).toBeGreaterThan(0);
    const slot = plannedInstantOf(jobs[0]);
    const ok = await withTransaction(fx.api.pool, (tx) => lockIfRemindersRun(tx, id, slot));
    await fx.api.reminders.stop(id);
    // The one catch-up the reconciler makes must be a slot the guard sends (one owed after "on").
    expect({ catchUpAfterResume: slot.getTime() >= resumedAt.getTime(), guard: ok }).toEqual({ catchUpAfterResume: true, guard: true });
  }, 60_000);
});
