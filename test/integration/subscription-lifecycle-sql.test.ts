// The subscription lifecycle's database side (migration 1700000002050, src/db/subscriptions.ts,
// src/invoicing/subscription-period.ts) against a real Postgres, without a chain: the events the
// triggers write (the presented Subscription, exactly as GET /v1/subscriptions/{id} shows it), the
// advance when a period invoice turns paid by any writer (plain SQL here), past_due and back,
// the claim and its lease, the period invoice, cancelSubscription, ended.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, it } from 'vitest';
import { upsertCustomer } from '../../src/db/customers.js';
import { findPeriodInvoice, recordFailedAttempt } from '../../src/db/invoices.js';
import { withTransaction } from '../../src/db/pool.js';
import {
  cancelSubscription,
  claimCancelWork,
  claimChargeWork,
  findSubscription,
  markSubscriptionEnded,
  recordSubscriptionAttemptFailed,
  releaseWork,
} from '../../src/db/subscriptions.js';
import { SUBSCRIPTION_STATUSES } from '../../src/domain/subscriptions.js';
import { presentSubscription } from '../../src/http/presenters.js';
import { ensurePeriodInvoice } from '../../src/invoicing/subscription-period.js';
import { useApiFixture } from '../helpers/http.js';
import { seedSubscription, type SeedSubscription } from '../helpers/subscriptions.js';

const { fx, keys, call } = useApiFixture({ otherMerchant: false });
const addr = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
let base: Omit<SeedSubscription, 'startedAt' | 'intervalSeconds' | 'onchainId'>;
let onchainIds = 0;
const scope = () => ({ accountId: fx.merchant.accountId, environment: 'sandbox' as const });

beforeAll(async () => {
  const product = await call('POST', '/v1/products', keys.sandbox, { name: 'Gold plan', prices: [{ amount: '9.99', cadence: 'monthly' }] });
  expect(product.status, product.raw).toBe(200);
  const price = product.body.data.prices[0];
  const customer = await upsertCustomer(fx.api.pool, scope(), 'subscriber@example.test', null, null, null);
  base = {
    accountId: fx.merchant.accountId,
    priceId: price.id,
    customerId: customer.id,
    chainId: price.chain_id,
    network: price.network,
    contract: addr(),
    subscriber: addr(),
    payee: addr(),
    token: addr(),
    feeAddress: addr(),
    operator: addr(),
    amount: '9.99',
    amountAtomic: '9990000',
    feeBps: 50,
  };
});

const seed = (over: Partial<SeedSubscription> = {}) =>
  seedSubscription(fx.api.pool, { ...base, onchainId: String(++onchainIds), intervalSeconds: 60, startedAt: new Date(Date.now() - 61_000), ...over });

async function eventsOf(id: string): Promise<{ type: string; object: Record<string, unknown> | null; snapshot: Record<string, unknown> | null }[]> {
  const { rows } = await fx.api.pool.query('select type, object, snapshot from events where object_id = $1 order by created_at, id', [id]);
  return rows;
}
const sub = async (id: string) => (await findSubscription(fx.api.pool, scope(), id))!;
const nextWorkAt = async (id: string): Promise<Date | null> =>
  (await fx.api.pool.query<{ next_work_at: Date | null }>('select next_work_at from subscriptions where id = $1', [id])).rows[0].next_work_at;

/** Claims exactly this subscription (others of the file are pushed out of the way first). */
async function claimOnly(id: string) {
  await fx.api.pool.query(`update subscriptions set next_work_at = now() + interval '1 hour' where id <> $1 and next_work_at <= now()`, [id]);
  const claimed = await claimChargeWork(fx.api.pool, 10, 60_000);
  expect(claimed.map((c) => c.id)).toEqual([id]);
  return claimed[0];
}

describe('events', () => {
  it('subscription.created carries the Subscription exactly as the API presents it', async () => {
    const id = await seed({ startedAt: new Date('2026-03-01T10:00:00.123Z') });
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(['subscription.created']);
    expect(events[0].object).toEqual(presentSubscription(await sub(id)));
    expect(events[0].object).toMatchObject({ started_at: '2026-03-01T10:00:00.123Z', next_charge_at: '2026-03-01T10:01:00.123Z', ends_at: null });
  });

  it('past_due, canceled (with who) and ended each write one event; active again writes none', async () => {
    const id = await seed();
    await fx.api.pool.query(`update subscriptions set status = 'past_due' where id = $1`, [id]);
    await fx.api.pool.query(`update subscriptions set status = 'past_due', amount = amount where id = $1`, [id]);
    await fx.api.pool.query(`update subscriptions set status = 'active' where id = $1`, [id]);
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer', onchain_canceled_at = now() where id = $1`, [id]);
    const events = await eventsOf(id);
    expect(events.map((e) => e.type)).toEqual(['subscription.created', 'subscription.past_due', 'subscription.canceled']);
    expect(events[2].object).toEqual(presentSubscription(await sub(id)));
    expect(events[2].object).toMatchObject({ canceled_by: 'customer' });
    // Canceled by the customer on-chain: nothing left for the worker.
    expect(await nextWorkAt(id)).toBeNull();

    const ends = await seed();
    const claimed = await claimOnly(ends);
    expect(await markSubscriptionEnded(fx.api.pool, ends, claimed.lease)).toBe(true);
    expect((await eventsOf(ends)).map((e) => e.type)).toEqual(['subscription.created', 'subscription.ended']);
    expect(await nextWorkAt(ends)).toBeNull();
  });

  it('the status check holds exactly the domain statuses', async () => {
    const id = await seed();
    for (const s of SUBSCRIPTION_STATUSES) await fx.api.pool.query('update subscriptions set status = $2 where id = $1', [id, s]);
    await expect(fx.api.pool.query(`update subscriptions set status = 'paused' where id = $1`, [id])).rejects.toThrow(/subscriptions_status_check/);
  });
});

describe('claims and period invoices', () => {
  it('a due subscription is claimed once and leased; the lease guards every write', async () => {
    const id = await seed();
    expect((await nextWorkAt(id))!.getTime()).toBe((await sub(id)).next_charge_at!.getTime());
    const claimed = await claimOnly(id);
    expect(claimed.lease.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect((await claimChargeWork(fx.api.pool, 10, 60_000)).map((c) => c.id)).not.toContain(id);
    expect(await releaseWork(fx.api.pool, id, new Date(claimed.lease.getTime() + 1), new Date())).toBe(false);
    expect(await releaseWork(fx.api.pool, id, claimed.lease, new Date(Date.now() - 1))).toBe(true);
    expect((await claimChargeWork(fx.api.pool, 10, 60_000)).map((c) => c.id)).toContain(id);
  });

  // One run ahead (the job passes its poll interval): a period's first attempt falling due within
  // it is claimed before its time, so its invoice is ready when it falls due. Nothing else is
  // claimed early: a retry (its work at its next_attempt_at, not the due time), a check of a sent
  // charge, a past_due subscription, or one that ends by then (it is ended, not billed).
  it('claimed ahead: only an active subscription whose period falls due within the window, its first attempt, not ending by then', async () => {
    // Every instant from one clock reading: `ending` ends exactly when its period falls due (two
    // readings a millisecond apart made it end just after, and so claimable). Due 5 s ahead, a
    // window of 15 s: a stall of seconds on a loaded machine does not make anything due on its own.
    const now = Date.now();
    const dueAt = now + 5_000;
    const periodFrom = (due: number) => new Date(due - 60_000);
    const first = await seed({ startedAt: periodFrom(dueAt) });
    const retry = await seed();
    const pastDue = await seed({ startedAt: periodFrom(dueAt) });
    const ending = await seed({ startedAt: periodFrom(dueAt), endsAt: new Date(dueAt) });
    const later = await seed({ startedAt: periodFrom(now + 30_000) });
    await fx.api.pool.query(`update subscriptions set next_work_at = now() + interval '1 hour' where id <> all($1::text[]) and next_work_at <= now() + interval '1 hour'`, [[first, retry, pastDue, ending, later]]);
    await fx.api.pool.query(`update subscriptions set next_work_at = $2 where id = $1`, [retry, new Date(dueAt)]);
    await fx.api.pool.query(`update subscriptions set status = 'past_due' where id = $1`, [pastDue]);
    expect((await sub(ending)).ends_at!.getTime()).toBe((await sub(ending)).next_charge_at!.getTime());
    // Without the window: nothing of these is due yet.
    expect((await claimChargeWork(fx.api.pool, 10, 60_000)).map((c) => c.id)).toEqual([]);
    const claimed = await claimChargeWork(fx.api.pool, 10, 60_000, 15_000);
    expect(claimed.map((c) => c.id)).toEqual([first]);
    expect(claimed[0].next_charge_at.getTime()).toBeGreaterThan(Date.now());
  });

  it("period k's invoice: its dates, the amount, reminders off, issued to the payee, one per period", async () => {
    const startedAt = new Date('2026-02-01T00:00:00.000Z');
    const id = await seed({ startedAt, intervalSeconds: 3600 });
    const claimed = await claimOnly(id);
    const inv = await ensurePeriodInvoice(fx.api.pool, claimed, 1);
    expect(inv).toMatchObject({
      status: 'open',
      amount: '9.99',
      amount_atomic: '9990000',
      fee_atomic: '49950',
      attempt_count: 0,
      next_attempt_at: null,
      reminders_enabled: false,
      settlement_address: base.payee,
      currency: 'USDC',
    });
    expect(inv.period_start!.toISOString()).toBe('2026-02-01T01:00:00.000Z');
    expect(inv.period_end!.toISOString()).toBe('2026-02-01T02:00:00.000Z');
    expect(inv.code).toMatch(/^/);
    expect(inv.payment_reference).toMatch(/^0x[0-9a-f]{16}$/);
    expect((await ensurePeriodInvoice(fx.api.pool, claimed, 1)).id).toBe(inv.id);
    expect((await findPeriodInvoice(fx.api.pool, id, 1))!.id).toBe(inv.id);
    const { rows } = await fx.api.pool.query('select period_index, subscription_id from invoices where id = $1', [inv.id]);
    expect(rows[0]).toEqual({ period_index: 1, subscription_id: id });
  });
});

describe('attempts, the advance trigger, cancel', () => {
  it('a failed attempt: past_due and invoice.payment_failed; paid by plain SQL: active, next period, no attempt announced', async () => {
    const startedAt = new Date(Date.now() - 3_700_000);
    const id = await seed({ startedAt, intervalSeconds: 3600 });
    const claimed = await claimOnly(id);
    const inv = await ensurePeriodInvoice(fx.api.pool, claimed, 1);
    const retryAt = new Date(Date.now() + 3_600_000);
    await withTransaction(fx.api.pool, async (tx) => {
      const failed = await recordFailedAttempt(tx, inv.id, { code: 'insufficient_balance', message: 'short', nextAttemptAt: retryAt });
      expect(failed).toMatchObject({ attempt_count: 1, failure_code: 'insufficient_balance', failure_message: 'short' });
      expect(await recordSubscriptionAttemptFailed(tx, id, claimed.lease, { kind: 'retry', nextWorkAt: retryAt })).toBe(true);
    });
    expect((await sub(id)).status).toBe('past_due');
    expect((await nextWorkAt(id))!.getTime()).toBe(retryAt.getTime());
    const invoiceEvents = await eventsOf(inv.id);
    expect(invoiceEvents.map((e) => e.type)).toContain('invoice.payment_failed');
    expect(invoiceEvents.find((e) => e.type === 'invoice.payment_failed')!.snapshot).toMatchObject({ attempt_count: 1, failure_code: 'insufficient_balance' });

    // Whatever paid it (here an operator's SQL): the subscription advances.
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
    const after = await sub(id);
    expect(after.status).toBe('active');
    expect(after.current_period_start.getTime()).toBe(inv.period_start!.getTime());
    expect(after.next_charge_at!.getTime()).toBe(inv.period_end!.getTime());
    expect((await nextWorkAt(id))!.getTime()).toBe(inv.period_end!.getTime());
    expect((await findPeriodInvoice(fx.api.pool, id, 1))!.next_attempt_at).toBeNull();
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(['subscription.created', 'subscription.past_due']);
  });

  it('stays past_due while another period invoice is unpaid with a failed attempt; never moves back', async () => {
    const id = await seed({ startedAt: new Date(Date.now() - 7_300_000), intervalSeconds: 3600 });
    const claimed = await claimOnly(id);
    const one = await ensurePeriodInvoice(fx.api.pool, claimed, 1);
    const two = await ensurePeriodInvoice(fx.api.pool, claimed, 2);
    await withTransaction(fx.api.pool, async (tx) => {
      await recordFailedAttempt(tx, one.id, { code: 'insufficient_allowance', message: 'x', nextAttemptAt: null });
      await recordFailedAttempt(tx, two.id, { code: 'insufficient_allowance', message: 'x', nextAttemptAt: null });
      await recordSubscriptionAttemptFailed(tx, id, claimed.lease, { kind: 'keep', nextChargeAt: two.period_end!, nextWorkAt: two.period_end! });
    });
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [two.id]);
    expect((await sub(id)).status).toBe('past_due');
    expect((await sub(id)).next_charge_at!.getTime()).toBe(two.period_end!.getTime());
    // Period 1 paid late, by wallet: active, and the clock does not move back.
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [one.id]);
    const after = await sub(id);
    expect(after.status).toBe('active');
    expect(after.next_charge_at!.getTime()).toBe(two.period_end!.getTime());
    expect(after.current_period_start.getTime()).toBe(two.period_start!.getTime());
  });

  it('cancelSubscription: canceled by the merchant, dunning stops, the on-chain cancel is due; twice: not active; another scope: not found', async () => {
    const id = await seed({ startedAt: new Date(Date.now() - 3_700_000), intervalSeconds: 3600 });
    const claimed = await claimOnly(id);
    const inv = await ensurePeriodInvoice(fx.api.pool, claimed, 1);
    await recordFailedAttempt(fx.api.pool, inv.id, { code: 'insufficient_balance', message: 'x', nextAttemptAt: new Date(Date.now() + 60_000) });
    const first = await withTransaction(fx.api.pool, (tx) => cancelSubscription(tx, scope(), id, 'merchant'));
    expect(first.outcome).toBe('canceled');
    expect((await findPeriodInvoice(fx.api.pool, id, 1))!.next_attempt_at).toBeNull();
    const events = await eventsOf(id);
    expect(events.at(-1)).toMatchObject({ type: 'subscription.canceled', object: { status: 'canceled', canceled_by: 'merchant' } });
    expect((await nextWorkAt(id))!.getTime()).toBeLessThanOrEqual(Date.now());
    const cancels = await claimCancelWork(fx.api.pool, 10, 60_000);
    expect(cancels.map((c) => c.id)).toContain(id);
    expect(cancels.find((c) => c.id === id)).toMatchObject({ status: 'canceled', canceled_by: 'merchant', cancel_sent_at: null });
    expect((await claimChargeWork(fx.api.pool, 100, 60_000)).map((c) => c.id)).not.toContain(id);

    const again = await withTransaction(fx.api.pool, (tx) => cancelSubscription(tx, scope(), id, 'merchant'));
    expect(again.outcome).toBe('not_active');
    expect((await withTransaction(fx.api.pool, (tx) => cancelSubscription(tx, { ...scope(), environment: 'live' }, id, 'merchant'))).outcome).toBe('not_found');
    expect((await withTransaction(fx.api.pool, (tx) => cancelSubscription(tx, scope(), 'sub_nope', 'merchant'))).outcome).toBe('not_found');
    expect((await eventsOf(id)).filter((e) => e.type === 'subscription.canceled')).toHaveLength(1);
  });
});
