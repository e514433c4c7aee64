// Adversarial tests of recurring payments (issue 26) as another tenant: a second merchant, the
// other environment's key and a read-only key try to read, list, cancel or follow a merchant's
// subscription and its period invoices. Each is refused in the error envelope and changes nothing
// (no status change, no event, no on-chain cancel planned). The subscription is made from a real
// checkout as the watcher makes it (test/helpers/subscriptions.ts).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type JsonBody } from '../helpers/http.js';
import { postSubscriptionCheckout, seedSubscriptionFromCheckout, TEST_FEE_ADDRESS, TEST_OPERATOR, TEST_SUBSCRIPTION_MANAGER } from '../helpers/subscriptions.js';

const MERCHANT = '0x4444444444444444444444444444444444444444';
const OTHER_MERCHANT = '0x4444444444444444444444444444444444444445';
const SUBSCRIBER = '0x7777777777777777777777777777777777777777';

const chainsFile = path.join(mkdtempSync(path.join(tmpdir(), 'subscription-attacks-tenant-')), 'chains.json');
writeFileSync(chainsFile, JSON.stringify([{ chain_id: 84532, subscription_manager: TEST_SUBSCRIPTION_MANAGER, fee_address: TEST_FEE_ADDRESS }]));

const { fx, keys, other, call } = useApiFixture({
  overrides: { CHAINS_FILE: chainsFile, CHECKOUT_LIMIT_PER_LINK: '1000' },
  deps: { operatorAddress: () => TEST_OPERATOR.address },
});

let n = 0;
let linkId: string;
let otherLinkId: string;

async function linkOf(key: string): Promise<string> {
  const product = await call('POST', '/v1/products', key, { name: 'Plan', prices: [{ amount: '9.99', cadence: 'monthly' }] });
  expect(product.status, product.raw).toBe(200);
  const link = await call('POST', '/v1/payment-links', key, { name: 'Plan', type: 'fixed_price', price_id: product.body.data.prices[0].id });
  expect(link.status, link.raw).toBe(200);
  return link.body.data.id;
}

/** A subscription of the merchant's link, made as the watcher makes it; with its checkout and period-0 invoice. */
async function subscription(email = `victim-${++n}@example.test`): Promise<{ sub: JsonBody; checkoutId: string; invoiceId: string }> {
  const started = await postSubscriptionCheckout(fx.api.app, linkId, email);
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  const id = await seedSubscriptionFromCheckout(fx.api.pool, started.body.checkout_id, { subscriber: SUBSCRIBER, onchainId: String(1000 + n) });
  const got = await call('GET', `/v1/subscriptions/${id}`, keys.sandbox);
  expect(got.status, got.raw).toBe(200);
  const { rows } = await fx.api.pool.query<{ invoice_id: string }>('select invoice_id from subscription_checkouts where id = $1', [started.body.checkout_id]);
  return { sub: got.body.data, checkoutId: started.body.checkout_id, invoiceId: rows[0].invoice_id };
}

const eventsOf = async (id: string) => (await fx.api.pool.query<{ type: string }>('select type from events where object_id = $1 order by created_at, id', [id])).rows.map((r) => r.type);
const rowOf = async (id: string) =>
  (await fx.api.pool.query<{ status: string; canceled_by: string | null; next_work_at: Date | null }>('select status, canceled_by, next_work_at from subscriptions where id = $1', [id])).rows[0];

beforeAll(async () => {
  for (const [key, address] of [[keys.sandbox, MERCHANT], [keys.live, MERCHANT], [other.sandbox, OTHER_MERCHANT], [other.live, OTHER_MERCHANT]]) {
    const set = await call('PATCH', '/v1/account', key, { settlement_address: address });
    expect(set.status, set.raw).toBe(200);
  }
  linkId = await linkOf(keys.sandbox);
  otherLinkId = await linkOf(other.sandbox);
});

describe("another tenant against a merchant's subscription", () => {
  it("another account's keys and the other environment's: retrieve, its invoices, cancel are 404; the list and the email filter show nothing; the period invoice is 404", async () => {
    const { sub, invoiceId } = await subscription();
    const before = await rowOf(sub.id);
    for (const key of [other.sandbox, other.live, keys.live, other.sandbox_read_only, keys.live_read_only]) {
      expectError(await call('GET', `/v1/subscriptions/${sub.id}`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('GET', `/v1/subscriptions/${sub.id}/invoices`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('GET', `/v1/invoices/${invoiceId}`, key), 404, 'invalid_request_error', 'resource_missing');
      const list = await call('GET', `/v1/subscriptions?customer_email=${encodeURIComponent(sub.customer_email)}&limit=100`, key);
      expect(list.status, list.raw).toBe(200);
      expect(list.body.data).toEqual([]);
      const all = await call('GET', '/v1/subscriptions?limit=100', key);
      expect((all.body.data as JsonBody[]).map((s) => s.id)).not.toContain(sub.id);
    }
    for (const key of [other.sandbox, other.live, keys.live]) {
      expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    // Nothing changed: still active, no cancel event, no on-chain cancel planned.
    expect(await rowOf(sub.id)).toEqual(before);
    expect(await eventsOf(sub.id)).toEqual(['subscription.created']);
    // The owner still sees it whole.
    const mine = await call('GET', `/v1/subscriptions/${sub.id}/invoices`, keys.sandbox);
    expect((mine.body.data as JsonBody[]).map((i) => i.id)).toEqual([invoiceId]);
  });

  it("the merchant's own read-only key cannot cancel (403 permission_denied), and changes nothing", async () => {
    const { sub } = await subscription();
    const before = await rowOf(sub.id);
    expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    expect(await rowOf(sub.id)).toEqual(before);
    expect(await eventsOf(sub.id)).toEqual(['subscription.created']);
  });

  it("a checkout's status page answers only under its own link: another merchant's link id with it is 404", async () => {
    const { sub, checkoutId } = await subscription();
    const own = await fx.api.app.inject({ method: 'GET', url: `/pay/${linkId}/subscribe/${checkoutId}/status` });
    expect(own.statusCode, own.body).toBe(200);
    expect(own.json()).toMatchObject({ status: 'subscribed' });
    const crossed = await fx.api.app.inject({ method: 'GET', url: `/pay/${otherLinkId}/subscribe/${checkoutId}/status` });
    expect(crossed.statusCode, crossed.body).toBe(404);
    expect(JSON.stringify(crossed.json())).not.toContain(sub.id);
  });

  it("another merchant's checkout names that merchant's payee, never this one's: the terms a wallet gets differ in the payee", async () => {
    const mine = await postSubscriptionCheckout(fx.api.app, linkId, `terms-${++n}@example.test`);
    const theirs = await postSubscriptionCheckout(fx.api.app, otherLinkId, `terms-${++n}@example.test`);
    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    const payee = (b: JsonBody) => String((b.terms as JsonBody).payee).toLowerCase();
    expect(payee(mine.body)).toBe(MERCHANT);
    expect(payee(theirs.body)).toBe(OTHER_MERCHANT);
    // Their checkout's reference is refused for this merchant's terms by the watcher's exact match
    // (test/unit/subscription-attacks.test.ts); here: the references differ and each names its own account.
    const { rows } = await fx.api.pool.query<{ account_id: string; payee_address: string }>(
      'select account_id, payee_address from subscription_checkouts where id = any($1::text[]) order by created_at',
      [[mine.body.checkout_id, theirs.body.checkout_id]],
    );
    expect(rows.map((r) => r.payee_address.toLowerCase())).toEqual([MERCHANT, OTHER_MERCHANT]);
    expect(new Set(rows.map((r) => r.account_id)).size).toBe(2);
  });
});
