// Adversarial races: 20 identical or conflicting requests fired at once on one object. Each
// must leave one consistent state, and exactly the events that state implies (none twice, none
// missing), whatever order Postgres serialises them in.
import { describe, expect, it } from 'vitest';
import { useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';

const N = 20;
const { fx, keys, call } = useApiFixture({ overrides: { RATE_LIMIT_MAX: '1000000' }, otherMerchant: false });

const times = <T>(n: number, f: (i: number) => Promise<T>) => Promise.all(Array.from({ length: n }, (_, i) => f(i)));
async function ok(method: 'POST' | 'PATCH' | 'DELETE' | 'GET', url: string, body?: unknown, key = keys.sandbox): Promise<JsonBody> {
  const res = await call(method, url, key, body);
  expect(res.status, `${method} ${url}: ${res.raw}`).toBe(200);
  return res.body.data;
}
/** Events about one object, oldest first (created_at is the clock at emission, so commit order). */
async function eventsOf(objectId: string): Promise<{ type: string; object: JsonBody | null; snapshot: JsonBody | null }[]> {
  const { rows } = await fx.api.pool.query(
    'select type, object, snapshot from events where object_id = $1 order by created_at, id',
    [objectId],
  );
  return rows;
}
const statuses = (rs: ApiResponse[]) => rs.map((r) => r.status).sort();
const codes = (rs: ApiResponse[]) => [...new Set(rs.filter((r) => r.status !== 200).map((r) => r.body?.error?.code))];

describe('20 identical writes at once', () => {
  it('20 voids of one open invoice: one 200, 19 invoice_not_voidable, exactly one invoice.voided event', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'void-race@example.test', amount: '3' });
    await ok('POST', `/v1/invoices/${inv.id}/send`);
    const rs = await times(N, () => call('POST', `/v1/invoices/${inv.id}/void`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(statuses(rs).filter((s) => s !== 200).every((s) => s === 400)).toBe(true);
    expect(codes(rs)).toEqual(['invoice_not_voidable']);
    const types = (await eventsOf(inv.id)).map((e) => e.type);
    expect(types.filter((t) => t === 'invoice.voided')).toHaveLength(1);
    expect((await ok('GET', `/v1/invoices/${inv.id}`)).status).toBe('void');
  });

  it('20 sends of one draft: one 200, one code taken, one email owed, one invoice.sent event', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'send-race@example.test', amount: '3' });
    const before = await fx.api.pool.query(`select last_number from invoice_counters where account_id = $1 and environment = 'sandbox'`, [fx.merchant.accountId]);
    const rs = await times(N, () => call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(codes(rs)).toEqual(['invoice_already_sent']);
    const after = await fx.api.pool.query(`select last_number from invoice_counters where account_id = $1 and environment = 'sandbox'`, [fx.merchant.accountId]);
    expect(after.rows[0].last_number - (before.rows[0]?.last_number ?? 0)).toBe(1);
    const { rows: d } = await fx.api.pool.query(`select count(*)::int as n from deliveries where invoice_id = $1 and kind = 'invoice'`, [inv.id]);
    expect(d[0].n).toBe(1);
    expect((await eventsOf(inv.id)).map((e) => e.type).filter((t) => t === 'invoice.sent')).toHaveLength(1);
  });

  it('20 sandbox payments of one open invoice: one 200, one invoice.paid event, one receipt owed', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'pay-race@example.test', amount: '3' });
    await ok('POST', `/v1/invoices/${inv.id}/send`);
    const rs = await times(N, () => call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(codes(rs)).toEqual(['invoice_not_payable']);
    expect((await eventsOf(inv.id)).map((e) => e.type).filter((t) => t === 'invoice.paid')).toHaveLength(1);
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from deliveries where invoice_id = $1 and kind = 'receipt'`, [inv.id]);
    expect(rows[0].n).toBe(1);
    expect(await ok('GET', `/v1/invoices/${inv.id}`)).toMatchObject({ status: 'paid', amount_remaining_atomic: '0' });
  });

  it('20 deletes of one draft: one 200, the others 404, nothing left behind', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'del-race@example.test', line_items: [{ description: 'a', quantity: 2, unit_amount: '1.5' }] });
    const rs = await times(N, () => call('DELETE', `/v1/invoices/${inv.id}`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(codes(rs)).toEqual(['resource_missing']);
    const { rows } = await fx.api.pool.query('select (select count(*) from invoices where id = $1)::int as i, (select count(*) from invoice_line_items where invoice_id = $1)::int as l', [inv.id]);
    expect(rows[0]).toEqual({ i: 0, l: 0 });
  });

  it('20 deletes of one payment link: one 200, the others 404, exactly one payment_link.deleted event', async () => {
    const link = await ok('POST', '/v1/payment-links', { name: 'del race', min_amount: '1' });
    const rs = await times(N, () => call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(codes(rs)).toEqual(['resource_missing']);
    expect((await eventsOf(link.id)).map((e) => e.type)).toEqual(['payment_link.created', 'payment_link.deleted']);
  });

  it('20 deletes of one product: one 200, the others 404, its prices gone with it', async () => {
    const product = await ok('POST', '/v1/products', { name: 'del race', prices: [{ amount: '1', cadence: 'monthly' }] });
    const rs = await times(N, () => call('DELETE', `/v1/products/${product.id}`, keys.sandbox));
    expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
    expect(codes(rs)).toEqual(['resource_missing']);
    const { rows } = await fx.api.pool.query('select count(*)::int as n from prices where product_id = $1', [product.id]);
    expect(rows[0].n).toBe(0);
  });

  it('20 revocations of one key (some by the key itself): all 200 with the same revoked_at, exactly one credential.revoked event', async () => {
    const victim = await ok('POST', '/v1/credentials', { name: 'revoke race' });
    const rs = await times(N, (i) => call('DELETE', `/v1/credentials/${victim.id}`, i % 2 === 0 ? keys.sandbox : victim.secret));
    // The victim's own requests may come after its revocation committed: those are 401 revoked.
    for (const r of rs) {
      if (r.status !== 200) expect([r.status, r.body.error.code]).toEqual([401, 'api_key_revoked']);
    }
    const okOnes = rs.filter((r) => r.status === 200);
    expect(okOnes.length).toBeGreaterThanOrEqual(N / 2);
    expect(new Set(okOnes.map((r) => r.body.data.revoked_at)).size).toBe(1);
    expect((await eventsOf(victim.id)).map((e) => e.type)).toEqual(['credential.revoked']);
    const after = await call('GET', '/v1/invoices', victim.secret);
    expect([after.status, after.body.error.code]).toEqual([401, 'api_key_revoked']);
  });

  it('20 secret rotations of one webhook endpoint: the endpoint ends signing with the last secret handed out and the one before it', async () => {
    // 93.184.215.14 is a public literal: no DNS, no delivery needed here.
    const ep = await ok('POST', '/v1/webhook_endpoints', { url: 'https://93.184.215.14/race', enabled_events: ['*'] });
    const rs = await times(N, () => call('POST', `/v1/webhook_endpoints/${ep.id}/rotate_secret`, keys.sandbox));
    expect(statuses(rs)).toEqual(Array(N).fill(200));
    const { rows } = await fx.api.pool.query('select secret, previous_secret from webhook_endpoints where id = $1', [ep.id]);
    const handed = rs.map((r) => r.body.data.secret as string);
    expect(new Set(handed).size).toBe(N);
    expect(handed).toContain(rows[0].secret);
    expect([...handed, ep.secret]).toContain(rows[0].previous_secret);
  });
});

describe('20 conflicting writes at once', () => {
  it('20 PATCHes of one draft with different line items: the stored total is the sum of the stored lines, and the last invoice.updated shows it', async () => {
    const inv = await ok('POST', '/v1/invoices', { customer_email: 'lines-race@example.test', amount: '1' });
    const rs = await times(N, (i) =>
      call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, {
        line_items: Array.from({ length: (i % 4) + 1 }, (_, j) => ({ description: `r${i}l${j}`, quantity: i + 1, unit_amount: `${j + 1}` })),
        memo: `round ${i}`,
      }),
    );
    expect(statuses(rs)).toEqual(Array(N).fill(200));
    const lines = (await ok('GET', `/v1/invoices/${inv.id}/lines`)) as unknown as JsonBody[];
    const sum = lines.reduce((s, l) => s + Number(l.amount), 0);
    const final = await ok('GET', `/v1/invoices/${inv.id}`);
    expect(Number(final.amount)).toBe(sum);
    // Every line of one request: the descriptions all name the same round, whose memo is stored.
    const rounds = new Set(lines.map((l) => String(l.description).split('l')[0]));
    expect(rounds.size).toBe(1);
    const { rows } = await fx.api.pool.query('select memo from invoices where id = $1', [inv.id]);
    expect(rows[0].memo).toBe(`round ${[...rounds][0].slice(1)}`);
    const updates = (await eventsOf(inv.id)).filter((e) => e.type === 'invoice.updated');
    expect(updates).toHaveLength(N);
    expect(updates[updates.length - 1].snapshot?.amount.toString()).toBe(final.amount);
  });

  it('20 payment link PATCHes toggling status and name: the last payment_link.updated event is the link as it is', async () => {
    const link = await ok('POST', '/v1/payment-links', { name: 'toggle race', min_amount: '1' });
    const rs = await times(N, (i) => call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { status: i % 2 ? 'inactive' : 'active', name: `n${i}` }));
    expect(statuses(rs)).toEqual(Array(N).fill(200));
    const final = await ok('GET', `/v1/payment-links/${link.id}`);
    const updates = (await eventsOf(link.id)).filter((e) => e.type === 'payment_link.updated');
    expect(updates).toHaveLength(N);
    expect(updates[updates.length - 1].object).toMatchObject({ name: final.name, status: final.status });
  });

  it('20 product PATCHes: the last product.updated event is the product as it is', async () => {
    const product = await ok('POST', '/v1/products', { name: 'p race', prices: [{ amount: '1', cadence: 'monthly' }] });
    const rs = await times(N, (i) => call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { name: `p${i}`, active: i % 2 === 0, metadata: { round: String(i) } }));
    expect(statuses(rs)).toEqual(Array(N).fill(200));
    const final = await ok('GET', `/v1/products/${product.id}`);
    expect(final.metadata.round).toBe(final.name.slice(1));
    const updates = (await eventsOf(product.id)).filter((e) => e.type === 'product.updated');
    expect(updates).toHaveLength(N);
    expect(updates[updates.length - 1].object).toMatchObject({ name: final.name, active: final.active, metadata: final.metadata });
  });

  it('void, pay, send, PATCH, reminders and delete at once on one open invoice: exactly one of voided or paid, and the events agree with the end state', async () => {
    for (let round = 0; round < 5; round++) {
      const inv = await ok('POST', '/v1/invoices', { customer_email: 'mixed-race@example.test', amount: '4', due_at: '2031-01-01T00:00:00Z' });
      await ok('POST', `/v1/invoices/${inv.id}/send`);
      const rs = await times(N, (i) => {
        switch (i % 6) {
          case 0: return call('POST', `/v1/invoices/${inv.id}/void`, keys.sandbox);
          case 1: return call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
          case 2: return call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
          case 3: return call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { memo: 'late' });
          case 4: return call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: i % 4 === 0 });
          default: return call('DELETE', `/v1/invoices/${inv.id}`, keys.sandbox);
        }
      });
      for (const r of rs) expect(r.status, r.raw).toBeLessThan(500);
      const final = await ok('GET', `/v1/invoices/${inv.id}`);
      expect(['void', 'paid']).toContain(final.status);
      const types = (await eventsOf(inv.id)).map((e) => e.type);
      expect(types.filter((t) => t === 'invoice.voided' || t === 'invoice.paid')).toEqual([final.status === 'void' ? 'invoice.voided' : 'invoice.paid']);
      expect(types.filter((t) => t === 'invoice.sent')).toHaveLength(1);
      const wins = rs.filter((r, i) => r.status === 200 && (i % 6 === 0 || i % 6 === 1));
      expect(wins).toHaveLength(1);
      const { rows } = await fx.api.pool.query('select memo from invoices where id = $1', [inv.id]);
      expect(rows[0].memo).toBeNull();
    }
  });
});
