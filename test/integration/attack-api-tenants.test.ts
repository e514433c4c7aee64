// Another tenant and the other environment against one merchant's sandbox objects, over every
// route that names an object: always the same 404 a made-up id gets (nothing to tell "exists
// elsewhere" from "never existed"), never a change; lists, filters and cursors show nothing.
import { beforeAll, describe, expect, it } from 'vitest';
import { useApiFixture, type HttpMethod, type JsonBody } from '../helpers/http.js';

const { fx, keys, other, call } = useApiFixture({ overrides: { RATE_LIMIT_MAX: '1000000' } });

let mine: Record<string, string>;
async function ok(method: HttpMethod, url: string, body?: unknown, key = keys.sandbox): Promise<JsonBody> {
  const res = await call(method, url, key, body);
  expect(res.status, `${method} ${url}: ${res.raw}`).toBe(200);
  return res.body.data;
}

beforeAll(async () => {
  const draft = await ok('POST', '/v1/invoices', { customer_email: 'Victim.Customer@example.test', amount: '5', line_items: [{ description: 'a', quantity: 1, unit_amount: '5' }] });
  const open = await ok('POST', '/v1/invoices', { customer_email: 'Victim.Customer@example.test', amount: '6', due_at: '2031-01-01T00:00:00Z' });
  await ok('POST', `/v1/invoices/${open.id}/send`);
  const link = await ok('POST', '/v1/payment-links', { name: 'victim link', min_amount: '1' });
  const product = await ok('POST', '/v1/products', { name: 'victim product', prices: [{ amount: '3', cadence: 'monthly' }] });
  const endpoint = await ok('POST', '/v1/webhook_endpoints', { url: 'https://93.184.215.14/victim', enabled_events: ['*'] });
  const credential = await ok('POST', '/v1/credentials', { name: 'victim key' });
  const events = (await call('GET', '/v1/events?limit=1', keys.sandbox)).body.data as unknown as JsonBody[];
  mine = { draft: draft.id, open: open.id, link: link.id, product: product.id, price: product.prices[0].id, endpoint: endpoint.id, credential: credential.id, event: events[0].id };
});

/** Every route naming one of `ids`' objects, with a body a valid request would carry. */
function objectRoutes(ids: Record<string, string>): { method: HttpMethod; url: string; body?: unknown }[] {
  return [
    { method: 'GET', url: `/v1/invoices/${ids.draft}` },
    { method: 'PATCH', url: `/v1/invoices/${ids.draft}`, body: { memo: 'hijacked', amount: '5' } },
    { method: 'DELETE', url: `/v1/invoices/${ids.draft}` },
    { method: 'POST', url: `/v1/invoices/${ids.draft}/send` },
    { method: 'GET', url: `/v1/invoices/${ids.draft}/lines` },
    { method: 'GET', url: `/v1/invoices/${ids.draft}/pdf` },
    { method: 'GET', url: `/v1/invoices/${ids.open}/reminders` },
    { method: 'POST', url: `/v1/invoices/${ids.open}/reminders`, body: { enabled: false } },
    { method: 'GET', url: `/v1/invoices/${ids.open}/payments` },
    { method: 'POST', url: `/v1/invoices/${ids.open}/void` },
    { method: 'POST', url: `/v1/test_helpers/invoices/${ids.open}/pay` },
    { method: 'GET', url: `/v1/payment-links/${ids.link}` },
    { method: 'PATCH', url: `/v1/payment-links/${ids.link}`, body: { status: 'inactive', name: 'hijacked' } },
    { method: 'DELETE', url: `/v1/payment-links/${ids.link}` },
    { method: 'POST', url: `/v1/test_helpers/payment-links/${ids.link}/payments`, body: { amount: '2' } },
    { method: 'GET', url: `/v1/products/${ids.product}` },
    { method: 'PATCH', url: `/v1/products/${ids.product}`, body: { active: false } },
    { method: 'DELETE', url: `/v1/products/${ids.product}` },
    { method: 'GET', url: `/v1/webhook_endpoints/${ids.endpoint}` },
    { method: 'PATCH', url: `/v1/webhook_endpoints/${ids.endpoint}`, body: { url: 'https://93.184.215.14/attacker', status: 'disabled' } },
    { method: 'DELETE', url: `/v1/webhook_endpoints/${ids.endpoint}` },
    { method: 'POST', url: `/v1/webhook_endpoints/${ids.endpoint}/rotate_secret` },
    { method: 'GET', url: `/v1/webhook_endpoints/${ids.endpoint}/deliveries` },
    { method: 'DELETE', url: `/v1/credentials/${ids.credential}` },
    { method: 'GET', url: `/v1/events/${ids.event}` },
  ];
}
/** The same ids with the random part made up (same prefix and length). */
const madeUp = (ids: Record<string, string>) => Object.fromEntries(Object.entries(ids).map(([k, v]) => [k, v.replace(/_[0-9A-Za-z]+$/, (m) => `_${'Z'.repeat(m.length - 1)}`)]));

async function state(): Promise<unknown> {
  const { rows } = await fx.api.pool.query(
    `select (select json_agg(i order by i.id) from (select id, status, memo, amount::text, reminders_enabled, updated_at from invoices) i) as invoices,
       (select json_agg(l order by l.id) from (select id, name, status, updated_at from payment_links) l) as links,
       (select count(*) from payment_link_payments) as link_payments,
       (select json_agg(p order by p.id) from (select id, active, updated_at from products) p) as products,
       (select json_agg(w order by w.id) from (select id, url, status, secret, updated_at from webhook_endpoints) w) as endpoints,
       (select json_agg(c order by c.id) from (select id, revoked_at from credentials) c) as credentials,
       (select count(*) from events) as events`,
  );
  return rows[0];
}

describe("another account's keys and the other environment's", () => {
  it('every route naming an object answers exactly what a made-up id gets, and nothing changes', async () => {
    const before = await state();
    const fake = madeUp(mine);
    const wrong: string[] = [];
    const real = objectRoutes(mine);
    const made = objectRoutes(fake);
    for (const [name, key] of [['other sandbox', other.sandbox], ['other live', other.live], ['own live', keys.live]] as const) {
      for (let i = 0; i < real.length; i++) {
        const a = await call(real[i].method, real[i].url, key, real[i].body);
        const b = await call(made[i].method, made[i].url, key, made[i].body);
        // Test helpers refuse a live key before they look (403 live_mode_forbidden): the same for both ids.
        const owned = Object.keys(mine).find((k) => real[i].url.includes(mine[k]))!;
        const expected = { status: b.status, code: b.body?.error?.code, message: b.body?.error?.message?.replaceAll(fake[owned], mine[owned]) };
        const got = { status: a.status, code: a.body?.error?.code, message: a.body?.error?.message };
        if (JSON.stringify(got) !== JSON.stringify(expected)) wrong.push(`${name} ${real[i].method} ${real[i].url}: ${JSON.stringify(got)} vs made-up ${JSON.stringify(expected)}`);
        if (a.status !== 404 && a.status !== 403) wrong.push(`${name} ${real[i].method} ${real[i].url}: ${a.status}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(await state()).toEqual(before);
  });

  it('lists, filters and cursors of another account or environment show none of the objects', async () => {
    for (const key of [other.sandbox, other.live, keys.live, other.sandbox_read_only]) {
      for (const url of ['/v1/invoices?limit=100', '/v1/products?limit=100', '/v1/credentials?limit=100', '/v1/events?limit=100', '/v1/payment-links', '/v1/payments?limit=100']) {
        const res = await call('GET', url, key);
        expect(res.status, `${url} ${res.raw}`).toBe(200);
        const seen = JSON.stringify(res.body.data);
        for (const id of Object.values(mine)) expect(seen, `${url} shows ${id}`).not.toContain(id);
      }
      for (const email of ['Victim.Customer@example.test', 'victim.customer@example.test']) {
        expect((await call('GET', `/v1/invoices?customer_email=${encodeURIComponent(email)}`, key)).body).toEqual({ data: [], has_more: false });
      }
      expect((await call('GET', `/v1/payments?invoice_id=${mine.open}`, key)).body).toEqual({ data: [], has_more: false });
      for (const [list, id] of [['invoices', mine.draft], ['products', mine.product], ['credentials', mine.credential], ['events', mine.event]]) {
        for (const cursor of ['starting_after', 'ending_before']) {
          const res = await call('GET', `/v1/${list}?${cursor}=${id}`, key);
          expect([res.status, res.body.error?.code], `${list} ${cursor}`).toEqual([400, 'invalid_cursor']);
        }
      }
    }
  });

  it("another account cannot build on this account's price: price_not_found, as for a made-up price", async () => {
    const theirs = await call('POST', '/v1/payment-links', other.sandbox, { name: 'steal', price_id: mine.price });
    const none = await call('POST', '/v1/payment-links', other.sandbox, { name: 'steal', price_id: 'price_ZZZZZZZZZZZZZZZZZZZZZZZZ' });
    expect([theirs.status, theirs.body.error.code]).toEqual([400, 'price_not_found']);
    expect([none.status, none.body.error.code]).toEqual([400, 'price_not_found']);
    const live = await call('POST', '/v1/payment-links', keys.live, { name: 'cross env', price_id: mine.price });
    expect([live.status, live.body.error.code]).toEqual([400, 'price_not_found']);
  });
});
