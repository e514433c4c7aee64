// Races on one object: PATCH vs send, send vs send, PATCH vs PATCH, payment vs delete, payments
// vs max_payments. No update is lost, a sent invoice is never edited after it was sent, exactly
// one send wins, and invoice codes stay unique and gapless per account and environment.
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { useApiFixture, type ApiResponse } from '../helpers/http.js';

const ROUNDS = 20;

const { fx, keys, call } = useApiFixture({ otherMerchant: false });

async function draft(amount: string | undefined, key = keys.sandbox): Promise<string> {
  const res = await call('POST', '/v1/invoices', key, { customer_email: 'race@example.test', ...(amount === undefined ? {} : { amount }) });
  expect(res.status).toBe(200);
  return res.body.data.id;
}
async function stored(id: string) {
  const { rows } = await fx.api.pool.query(
    `select status, code, amount::text as amount, amount_atomic::text as amount_atomic, memo, sent_at, updated_at from invoices where id = $1`,
    [id],
  );
  return rows[0];
}
/** Codes of the account's sent invoices in one environment, as numbers, sorted. */
async function codeNumbers(accountId: string, environment: 'sandbox' | 'live'): Promise<{ codes: string[]; numbers: number[] }> {
  const { rows } = await fx.api.pool.query<{ code: string }>(
    `select code from invoices where account_id = $1 and environment = $2 and code is not null order by code`,
    [accountId, environment],
  );
  const codes = rows.map((r) => r.code);
  const prefix = environment === 'sandbox' ? 'TEST-INV-' : 'INV-';
  for (const c of codes) expect(c.startsWith(prefix), c).toBe(true);
  return { codes, numbers: codes.map((c) => Number(c.slice(prefix.length))).sort((a, b) => a - b) };
}
const oneToN = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('invoice races', () => {
  it(`PATCH vs send (${ROUNDS} rounds): the edit lands before the send or is refused; never after`, async () => {
    const outcomes = { editFirst: 0, sendFirst: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const id = await draft('10');
      const newAmount = `${11 + round}.5`;
      // Alternate who starts first so both orders get their chance.
      const patch = () => call('PATCH', `/v1/invoices/${id}`, keys.sandbox, { amount: newAmount, memo: `round ${round}` });
      const sendIt = () => call('POST', `/v1/invoices/${id}/send`, keys.sandbox);
      const [p, s] = round % 2 === 0 ? await Promise.all([patch(), sendIt()]) : await Promise.all([patch(), sendIt()].reverse()).then((r) => r.reverse());

      expect(s.status, JSON.stringify(s.body)).toBe(200);
      expect(s.body.data.status).toBe('open');
      const row = await stored(id);
      expect(row.status).toBe('open');
      // What was stored is what was sent.
      expect(row.amount).toBe(s.body.data.amount);
      expect(row.amount_atomic).toBe(s.body.data.amount_atomic);
      if (p.status === 200) {
        outcomes.editFirst++;
        expect(p.body.data.status).toBe('draft');
        expect(s.body.data.amount).toBe(newAmount);
        expect(row.memo).toBe(`round ${round}`);
        expect(Date.parse(p.body.data.updated_at)).toBeLessThanOrEqual(Date.parse(s.body.data.sent_at));
      } else {
        outcomes.sendFirst++;
        expect(p.status).toBe(400);
        expect(p.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invoice_not_editable' });
        expect(s.body.data.amount).toBe('10');
        expect(row.amount).toBe('10');
        expect(row.amount_atomic).toBe('10000000');
        expect(row.memo).toBeNull();
      }
      // Nothing changed after the send.
      expect((row.updated_at as Date).toISOString()).toBe(s.body.data.updated_at);
    }
    expect(outcomes.editFirst + outcomes.sendFirst).toBe(ROUNDS);
  });

  it(`send vs send (${ROUNDS} rounds): exactly one succeeds, one email is owed`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const id = await draft('5');
      const results = await Promise.all([1, 2, 3].map(() => call('POST', `/v1/invoices/${id}/send`, keys.sandbox)));
      const ok = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status !== 200);
      expect(ok).toHaveLength(1);
      for (const r of refused) {
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe('invoice_already_sent');
      }
      const row = await stored(id);
      expect(row.code).toBe(ok[0].body.data.code);
      const { rows: d } = await fx.api.pool.query(`select count(*)::int as n from deliveries where invoice_id = $1 and kind = 'invoice'`, [id]);
      const { rows: o } = await fx.api.pool.query(`select count(*)::int as n from outbox where payload->>'invoiceId' = $1`, [id]);
      expect([d[0].n, o[0].n]).toEqual([1, 1]);
    }
  });

  it('PATCH vs PATCH on different fields: both land', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const id = await draft('1');
      const results = await Promise.all([
        call('PATCH', `/v1/invoices/${id}`, keys.sandbox, { amount: '42' }),
        call('PATCH', `/v1/invoices/${id}`, keys.sandbox, { memo: 'kept' }),
        call('POST', `/v1/invoices/${id}/reminders`, keys.sandbox, { enabled: false }),
      ]);
      expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
      const row = await stored(id);
      expect(row).toMatchObject({ amount: '42', amount_atomic: '42000000', memo: 'kept' });
      expect((await call('GET', `/v1/invoices/${id}`, keys.sandbox)).body.data.reminders_enabled).toBe(false);
    }
  });

  it('invoice codes are unique and gapless per account and environment under concurrent sends', async () => {
    const second = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Second', email: null });
    const jobs: Promise<ApiResponse>[] = [];
    const expectSent = { mine: 0, mineLive: 0, second: 0 };
    for (let i = 0; i < 15; i++) {
      const mine = await draft('3');
      const noAmount = await draft(undefined); // refused before a number is taken
      const mineLive = await draft('3', keys.live);
      const theirs = await draft('3', second.keys.sandbox);
      jobs.push(
        call('POST', `/v1/invoices/${mine}/send`, keys.sandbox),
        call('POST', `/v1/invoices/${mine}/send`, keys.sandbox), // a loser that must not burn a number
        call('POST', `/v1/invoices/${noAmount}/send`, keys.sandbox),
        call('POST', `/v1/invoices/${mineLive}/send`, keys.live),
        call('POST', `/v1/invoices/${theirs}/send`, second.keys.sandbox),
      );
      expectSent.mine++;
      expectSent.mineLive++;
      expectSent.second++;
    }
    const results = await Promise.all(jobs);
    expect(results.filter((r) => r.status >= 500)).toEqual([]);
    expect(results.filter((r) => r.body?.error?.code === 'invoice_amount_missing')).toHaveLength(15);

    const mine = await codeNumbers(fx.merchant.accountId, 'sandbox');
    expect(new Set(mine.codes).size).toBe(mine.codes.length);
    expect(mine.numbers).toEqual(oneToN(mine.numbers.length));
    expect(mine.numbers.length).toBeGreaterThanOrEqual(expectSent.mine);
    const live = await codeNumbers(fx.merchant.accountId, 'live');
    expect(live.numbers).toEqual(oneToN(expectSent.mineLive));
    const theirs = await codeNumbers(second.accountId, 'sandbox');
    expect(theirs.numbers).toEqual(oneToN(expectSent.second));
  });
});

describe('payment link races', () => {
  it('payment vs delete: either the payment lands and the delete is refused, or the link is gone and the payment is refused', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const link = (await call('POST', '/v1/payment-links', keys.sandbox, { name: `race ${round}`, preset_amount: '2' })).body.data;
      const [pay, del] = await Promise.all([
        call('POST', `/v1/test_helpers/payment-links/${link.id}/payments`, keys.sandbox, {}),
        call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox),
      ]);
      const { rows } = await fx.api.pool.query('select count(*)::int as n from payment_link_payments where payment_link_id = $1', [link.id]);
      const exists = (await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).status === 200;
      if (pay.status === 200) {
        expect(del.status).toBe(409);
        expect(del.body.error.code).toBe('payment_link_has_payments');
        expect(rows[0].n).toBe(1);
        expect(exists).toBe(true);
      } else {
        expect(pay.status).toBe(404);
        expect(del.status).toBe(200);
        expect(rows[0].n).toBe(0);
        expect(exists).toBe(false);
      }
    }
  });

  it('concurrent payments never exceed max_payments', async () => {
    const link = (await call('POST', '/v1/payment-links', keys.sandbox, { name: 'limited', preset_amount: '1', max_payments: 3 })).body.data;
    const results = await Promise.all(Array.from({ length: 12 }, () => call('POST', `/v1/test_helpers/payment-links/${link.id}/payments`, keys.sandbox, {})));
    expect(results.filter((r) => r.status === 200)).toHaveLength(3);
    for (const r of results.filter((x) => x.status !== 200)) expect(r.body.error.code).toBe('payment_link_exhausted');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from payment_link_payments where payment_link_id = $1', [link.id]);
    expect(rows[0].n).toBe(3);
  });
});
