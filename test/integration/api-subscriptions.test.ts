// Subscriptions over HTTP: the subscription checkout of a recurring price's payment link
// (POST /pay/<link id>/subscribe and its status), and the v1 API on subscriptions the watcher made
// (seeded in SQL from a real checkout, as the watcher makes them): retrieve, list, their invoices,
// the merchant's cancel. The subscribe call on a real chain is test/integration/subscription-page.test.ts.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';
import { seedSubscriptionFromCheckout, TEST_OPERATOR } from '../helpers/subscriptions.js';

// Spec 2.6, then the documented extras.
const SUBSCRIPTION_FIELDS = [
  'id', 'status', 'mode', 'amount', 'amount_atomic', 'currency', 'cadence', 'interval_seconds', 'network', 'chain_id',
  'contract_address', 'onchain_id', 'platform_fee_bps', 'started_at', 'current_period_start', 'next_charge_at', 'ends_at',
  'customer_id', 'customer_email', 'price_id', 'subscriber_address', 'canceled_at', 'canceled_by',
].sort();
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const MANAGER = '0x5555555555555555555555555555555555555555';
const FEE_ADDRESS = '0x6666666666666666666666666666666666666666';
const MERCHANT = '0x4444444444444444444444444444444444444444';
const SUBSCRIBER = '0x7777777777777777777777777777777777777777';
const ORIGIN = 'https://pay.example.test';
/** polygon-amoy has a contract here but no relayer: the injected operator says so. */
const NO_RELAYER_CHAIN = 80002;

const chainsFile = path.join(mkdtempSync(path.join(tmpdir(), 'api-subscriptions-')), 'chains.json');
writeFileSync(
  chainsFile,
  JSON.stringify([
    { chain_id: 84532, subscription_manager: MANAGER, fee_address: FEE_ADDRESS },
    { chain_id: NO_RELAYER_CHAIN, subscription_manager: MANAGER, fee_address: FEE_ADDRESS },
  ]),
);

const { fx, keys, other, call } = useApiFixture({
  overrides: { CHAINS_FILE: chainsFile, CHECKOUT_LIMIT_PER_EMAIL: '3', CHECKOUT_LIMIT_PER_LINK: '1000' },
  deps: { operatorAddress: (chainId) => (chainId === NO_RELAYER_CHAIN ? null : TEST_OPERATOR.address) },
});

/** A page endpoint's answer: the API's shape, and its headers. */
type PageResponse = Omit<ApiResponse, 'body'> & { body: ApiResponse['body'] & JsonBody; headers: Record<string, unknown> };

let n = 0;
/** A fresh email per checkout: the per-email limit is 3 unpaid checkouts. */
const email = () => `subscriber-${++n}@example.test`;

/** POST /pay/<link>/subscribe as the link page's script does (same origin). */
async function subscribe(linkId: string, body: Record<string, unknown> = { customer_email: email() }, headers: Record<string, string> = {}): Promise<PageResponse> {
  const res = await fx.api.app.inject({
    method: 'POST',
    url: `/pay/${linkId}/subscribe`,
    headers: { 'content-type': 'application/json', origin: ORIGIN, 'sec-fetch-site': 'same-origin', ...headers },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json(), raw: res.body, headers: res.headers };
}

async function statusOf(url: string): Promise<PageResponse> {
  const res = await fx.api.app.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.json(), raw: res.body, headers: res.headers };
}

async function linkFor(priceId: string, key = keys.sandbox): Promise<string> {
  const res = await call('POST', '/v1/payment-links', key, { name: 'Plan', type: 'fixed_price', price_id: priceId });
  expect(res.status, res.raw).toBe(200);
  return res.body.data.id;
}

async function product(prices: Record<string, unknown>[], key = keys.sandbox): Promise<JsonBody> {
  const res = await call('POST', '/v1/products', key, { name: 'Plan', prices });
  expect(res.status, res.raw).toBe(200);
  return res.body.data;
}

/** A subscription made from a fresh checkout of `linkId` (the watcher's part in SQL). */
async function subscription(linkId: string, customerEmail = email()): Promise<JsonBody> {
  const started = await subscribe(linkId, { customer_email: customerEmail });
  expect(started.status, started.raw).toBe(200);
  const id = await seedSubscriptionFromCheckout(fx.api.pool, started.body.checkout_id, { subscriber: SUBSCRIBER, onchainId: String(++n) });
  const got = await call('GET', `/v1/subscriptions/${id}`, keys.sandbox);
  expect(got.status, got.raw).toBe(200);
  return got.body.data;
}

let monthlyLink: string;
let customLink: string;
let prices: JsonBody;

beforeAll(async () => {
  for (const key of [keys.sandbox, keys.live]) {
    const set = await call('PATCH', '/v1/account', key, { settlement_address: MERCHANT });
    expect(set.status, set.raw).toBe(200);
  }
  const p = await product([
    { amount: '9.99', cadence: 'monthly' },
    { amount: '1', interval_seconds: 10 },
    { amount: '30' },
    { amount: '0.5', currency: 'DAI', network: 'sepolia', cadence: 'weekly' },
    { amount: '2', network: 'polygon-amoy', cadence: 'daily' },
  ]);
  const [monthly, custom, once, daiWeekly, amoy] = p.prices;
  prices = { monthly, custom, once, daiWeekly, amoy };
  monthlyLink = await linkFor(monthly.id);
  customLink = await linkFor(custom.id);
});

describe('POST /pay/<link id>/subscribe', () => {
  it('makes the checkout: the first invoice as a link checkout\'s, and the exact terms the wallet signs', async () => {
    const customerEmail = email();
    const res = await subscribe(monthlyLink, { customer_email: customerEmail });
    expect(res.status, res.raw).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const a = res.body;
    expect(a.checkout_id).toMatch(/^subco_[0-9A-Za-z]{24}$/);
    expect(a).toMatchObject({
      status_url: `/pay/${monthlyLink}/subscribe/${a.checkout_id}/status`,
      chain_id: 84532,
      network: 'base-sepolia',
      currency: 'USDC',
      token_decimals: 6,
      contract_address: MANAGER,
      terms: {
        payee: MERCHANT,
        token: prices.monthly.token_address,
        amount: '9990000',
        period: 2_592_000,
        fee_bps: 50,
        fee_address: FEE_ADDRESS,
        operator: TEST_OPERATOR.address,
        ends_at: 0,
      },
      // Twelve periods (SUBSCRIPTION_ALLOWANCE_PERIODS), the fee inside each.
      allowance_atomic: '119880000',
      fee_atomic: '49950',
      chain: { chain_id: 84532, name: 'base-sepolia' },
    });
    expect(a.terms.checkout_reference).toMatch(/^0x[0-9a-f]{64}$/);
    expect(a.invoice_page_url).toMatch(/^https:\/\/pay\.example\.test\/[0-9A-Za-z]{20}$/);

    const { rows } = await fx.api.pool.query(
      `select k.*, k.amount_atomic::text as amount_atomic, i.status, i.reference, i.amount::text as inv_amount, i.amount_atomic::text as inv_atomic,
         i.fee_atomic::text as inv_fee, i.fee_bps as inv_fee_bps, i.payment_reference, i.reminders_enabled, i.checkout_expires_at, i.metadata,
         i.payment_link_id as inv_link, i.subscription_id as inv_sub, c.email
       from subscription_checkouts k join invoices i on i.id = k.invoice_id join customers c on c.id = k.customer_id where k.id = $1`,
      [a.checkout_id],
    );
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row).toMatchObject({
      payment_link_id: monthlyLink,
      price_id: prices.monthly.id,
      checkout_reference: a.terms.checkout_reference,
      chain_id: 84532,
      contract_address: MANAGER,
      payee_address: MERCHANT,
      token_address: prices.monthly.token_address,
      amount_atomic: '9990000',
      period_seconds: 2_592_000,
      fee_bps: 50,
      fee_address: FEE_ADDRESS,
      operator_address: TEST_OPERATOR.address,
      ends_at: null,
      subscription_id: null,
      // The first period's invoice: issued at once, emailed to nobody, expiring, no reminders.
      status: 'open',
      inv_amount: '9.99',
      inv_atomic: '9990000',
      inv_fee: '49950',
      inv_fee_bps: 50,
      reminders_enabled: false,
      metadata: { payment_link_id: monthlyLink, source: 'subscription_checkout' },
      inv_link: monthlyLink,
      inv_sub: null,
      email: customerEmail,
    });
    expect(row.payment_reference).toMatch(/^0x[0-9a-f]{16}$/);
    expect(row.checkout_expires_at).toBeInstanceOf(Date);
    // PAYMENT_PAGE_BASE of the tests is the origin itself.
    expect(a.invoice_page_url).toBe(`${ORIGIN}/${row.reference}`);
    const deliveries = await fx.api.pool.query('select kind from deliveries where invoice_id = $1', [row.invoice_id]);
    expect(deliveries.rows).toEqual([]);
    // Two checkouts never share a reference.
    const second = await subscribe(monthlyLink);
    expect(second.body.terms.checkout_reference).not.toBe(a.terms.checkout_reference);
  });

  it('a sandbox custom interval of 10 seconds; a live one under an hour is refused at the price', async () => {
    const res = await subscribe(customLink);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.terms).toMatchObject({ period: 10, amount: '1000000' });
    expectError(await call('POST', '/v1/products', keys.live, { name: 'x', prices: [{ amount: '1', interval_seconds: 3599 }] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '1', interval_seconds: 9 }] }), 400, 'invalid_request_error', 'validation_failed');
    expect((await call('POST', '/v1/products', keys.live, { name: 'x', prices: [{ amount: '1', interval_seconds: 3600 }] })).status).toBe(200);
  });

  it('follows the checkout: pending, then subscribed once the watcher made the subscription', async () => {
    const started = (await subscribe(monthlyLink)).body;
    const pending = await statusOf(started.status_url);
    expect(pending.status, pending.raw).toBe(200);
    expect(pending.body).toEqual({ status: 'pending', invoice_status: 'open', required_confirmations: 20, payments: [] });
    await seedSubscriptionFromCheckout(fx.api.pool, started.checkout_id, { subscriber: SUBSCRIBER, onchainId: '900' });
    expect((await statusOf(started.status_url)).body).toMatchObject({ status: 'subscribed' });
    // The pair (link, checkout) is the access: another link's path, or a made-up id, is a 404.
    expectError(await statusOf(`/pay/${customLink}/subscribe/${started.checkout_id}/status`), 404, 'invalid_request_error', 'resource_missing');
    expectError(await statusOf(`/pay/${monthlyLink}/subscribe/subco_nope/status`), 404, 'invalid_request_error', 'resource_missing');
    expectError(await statusOf(`/pay/${monthlyLink}/subscribe/${encodeURIComponent('a b')}/status`), 404, 'invalid_request_error', 'resource_missing');
  });

  it('refuses before the wallet is asked: a one-time price, an inactive product, a chain without contract or relayer, no settlement address', async () => {
    expectError(await subscribe(await linkFor(prices.once.id)), 400, 'invalid_request_error', 'price_not_recurring');
    const custom = await call('POST', '/v1/payment-links', keys.sandbox, { name: 'Tip', type: 'custom_amount', currency: 'USDC' });
    expectError(await subscribe(custom.body.data.id), 400, 'invalid_request_error', 'price_not_recurring');
    expectError(await subscribe(await linkFor(prices.daiWeekly.id)), 409, 'invalid_request_error', 'subscription_not_available');
    expectError(await subscribe(await linkFor(prices.amoy.id)), 409, 'invalid_request_error', 'subscription_not_available');

    const p = await product([{ amount: '3', cadence: 'daily' }]);
    const link = await linkFor(p.prices[0].id);
    expect((await call('PATCH', `/v1/products/${p.id}`, keys.sandbox, { active: false })).status).toBe(200);
    expectError(await subscribe(link), 400, 'invalid_request_error', 'product_inactive');

    const theirs = await product([{ amount: '3', cadence: 'daily' }], other.sandbox);
    expectError(await subscribe(await linkFor(theirs.prices[0].id, other.sandbox)), 409, 'invalid_request_error', 'payment_link_not_payable');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from subscription_checkouts where payment_link_id = $1', [link]);
    expect(rows[0].n).toBe(0);
  });

  it('a recurring price\'s link takes no one-time checkout, and no simulated one-time payment (test helper or page form)', async () => {
    const res = await fx.api.app.inject({
      method: 'POST',
      url: `/pay/${monthlyLink}/checkout`,
      headers: { 'content-type': 'application/json', origin: ORIGIN, 'sec-fetch-site': 'same-origin' },
      payload: JSON.stringify({ customer_email: email() }),
    });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'payment_link_not_payable', message: expect.stringContaining('sells a subscription') });

    const helper = await call('POST', `/v1/test_helpers/payment-links/${monthlyLink}/payments`, keys.sandbox, { customer_email: email() });
    expectError(helper, 409, 'invalid_request_error', 'payment_link_not_payable');
    const form = await fx.api.app.inject({
      method: 'POST',
      url: `/pay/${monthlyLink}/simulate`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ORIGIN, 'sec-fetch-site': 'same-origin' },
      payload: new URLSearchParams({ customer_email: email() }).toString(),
    });
    expect(form.statusCode).not.toBe(303);
    expect(form.body).toContain('sells a subscription');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from payment_link_payments where payment_link_id = $1', [monthlyLink]);
    expect(rows[0].n).toBe(0);
  });

  it('refuses bad input, another origin, an unknown link, and a fourth unpaid checkout of one email', async () => {
    expectError(await subscribe(monthlyLink, {}), 400, 'invalid_request_error', 'validation_failed');
    expectError(await subscribe(monthlyLink, { customer_email: 'not-an-email' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await subscribe(monthlyLink, { customer_email: email(), amount: '1' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await subscribe(monthlyLink, { customer_email: email() }, { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }), 403, 'permission_error', 'permission_denied');
    expectError(await subscribe('plink_doesnotexist'), 404, 'invalid_request_error', 'resource_missing');
    const busy = email();
    for (let i = 0; i < 3; i++) expect((await subscribe(monthlyLink, { customer_email: busy })).status).toBe(200);
    expectError(await subscribe(monthlyLink, { customer_email: busy }), 429, 'invalid_request_error', 'checkout_limit_reached');
  });

  it('an inactive product racing checkouts: each is refused or made whole, and every later one is refused', async () => {
    for (let round = 0; round < 5; round++) {
      const p = await product([{ amount: '1', cadence: 'daily' }]);
      const link = await linkFor(p.prices[0].id);
      const [off, ...starts] = await Promise.all([
        call('PATCH', `/v1/products/${p.id}`, keys.sandbox, { active: false }),
        subscribe(link),
        subscribe(link),
      ]);
      expect(off.status).toBe(200);
      for (const s of starts) if (s.status !== 200) expectError(s, 400, 'invalid_request_error', 'product_inactive');
      const { rows } = await fx.api.pool.query('select count(*)::int as n from subscription_checkouts where payment_link_id = $1', [link]);
      expect(rows[0].n).toBe(starts.filter((s) => s.status === 200).length);
      expectError(await subscribe(link), 400, 'invalid_request_error', 'product_inactive');
    }
  });
});

describe('the v1 API', () => {
  it('retrieves a subscription with every field filled', async () => {
    const customerEmail = email();
    const sub = await subscription(monthlyLink, customerEmail);
    expect(Object.keys(sub).sort()).toEqual(SUBSCRIPTION_FIELDS);
    expect(sub).toMatchObject({
      status: 'active',
      mode: 'pull',
      amount: '9.99',
      amount_atomic: '9990000',
      currency: 'USDC',
      cadence: 'monthly',
      interval_seconds: 2_592_000,
      network: 'base-sepolia',
      chain_id: 84532,
      contract_address: MANAGER,
      platform_fee_bps: 50,
      ends_at: null,
      customer_email: customerEmail,
      price_id: prices.monthly.id,
      subscriber_address: SUBSCRIBER,
      canceled_at: null,
      canceled_by: null,
    });
    expect(sub.id).toMatch(/^sub_/);
    expect(sub.customer_id).toMatch(/^cus_/);
    expect(sub.onchain_id).toMatch(/^[0-9]+$/);
    for (const f of ['started_at', 'current_period_start', 'next_charge_at']) expect(sub[f]).toMatch(ISO);
    expect(sub.current_period_start).toBe(sub.started_at);
    expect(Date.parse(sub.next_charge_at) - Date.parse(sub.started_at)).toBe(2_592_000_000);
    expect((await call('GET', `/v1/subscriptions/${sub.id}`, keys.sandbox_read_only)).body).toEqual({ data: sub });
  });

  it('lists subscriptions newest first, a page at a time, filtered by status and customer_email', async () => {
    const shared = `Shared-${email()}`;
    const a = await subscription(customLink, shared.toLowerCase());
    const b = await subscription(monthlyLink);
    const c = await subscription(customLink, shared.toLowerCase());
    const first = await call('GET', '/v1/subscriptions?limit=2', keys.sandbox_read_only);
    expect(first.status, first.raw).toBe(200);
    expect(first.body.data.map((s: JsonBody) => s.id)).toEqual([c.id, b.id]);
    expect(first.body.has_more).toBe(true);
    const next = await call('GET', `/v1/subscriptions?limit=1&starting_after=${b.id}`, keys.sandbox);
    expect(next.body.data.map((s: JsonBody) => s.id)).toEqual([a.id]);
    const mine = await call('GET', `/v1/subscriptions?customer_email=${encodeURIComponent(shared.toUpperCase())}`, keys.sandbox);
    expect(mine.body).toEqual({ data: [c, a], has_more: false });
    expect((await call('POST', `/v1/subscriptions/${b.id}/cancel`, keys.sandbox)).status).toBe(200);
    const canceled = await call('GET', '/v1/subscriptions?status=canceled', keys.sandbox);
    expect(canceled.body.data.map((s: JsonBody) => s.id)).toContain(b.id);
    expect(canceled.body.data.every((s: JsonBody) => s.status === 'canceled')).toBe(true);
    const active = await call('GET', '/v1/subscriptions?status=active&limit=100', keys.sandbox);
    expect(active.body.data.map((s: JsonBody) => s.id)).not.toContain(b.id);
    // Another tenant and the other environment see none of them.
    expect((await call('GET', '/v1/subscriptions', other.sandbox)).body).toEqual({ data: [], has_more: false });
    expect((await call('GET', '/v1/subscriptions', keys.live)).body).toEqual({ data: [], has_more: false });
  });

  it('refuses bad list queries with the envelope', async () => {
    expectError(await call('GET', '/v1/subscriptions?status=paused', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', '/v1/subscriptions?limit=0', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', '/v1/subscriptions?limit=abc', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', '/v1/subscriptions?colour=red', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', '/v1/subscriptions?starting_after=sub_nope', keys.sandbox), 400, 'invalid_request_error', 'invalid_cursor');
    expectError(await call('GET', '/v1/subscriptions?customer_email=', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
  });

  it("lists a subscription's invoices: the first period's is the checkout's", async () => {
    const started = (await subscribe(customLink)).body;
    const id = await seedSubscriptionFromCheckout(fx.api.pool, started.checkout_id, { subscriber: SUBSCRIBER, onchainId: '901' });
    const res = await call('GET', `/v1/subscriptions/${id}/invoices`, keys.sandbox_read_only);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.has_more).toBe(false);
    expect(res.body.data).toHaveLength(1);
    const inv = res.body.data[0];
    const sub = (await call('GET', `/v1/subscriptions/${id}`, keys.sandbox)).body.data;
    expect(inv).toMatchObject({ status: 'open', amount: '1', amount_atomic: '1000000', period_start: sub.started_at });
    expect(Date.parse(inv.period_end) - Date.parse(inv.period_start)).toBe(10_000);
    expect(inv.payment_instructions === null || inv.payment_instructions.payment_reference).toBeTruthy();
    expectError(await call('GET', `/v1/subscriptions/${id}/invoices?limit=500`, keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', `/v1/subscriptions/${id}/invoices?status=paid`, keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('GET', `/v1/subscriptions/${id}/invoices`, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('GET', '/v1/subscriptions/sub_nope/invoices', keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
    // A cursor is one of this list: the subscription's own invoice is; the account's one-off invoice
    // is not (it was taken as a place in time and answered 200).
    expect((await call('GET', `/v1/subscriptions/${id}/invoices?starting_after=${inv.id}`, keys.sandbox)).body).toEqual({ data: [], has_more: false });
    const oneOff = (await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'one-off@example.test', amount: '2' })).body.data;
    for (const cursor of ['starting_after', 'ending_before']) {
      expectError(await call('GET', `/v1/subscriptions/${id}/invoices?${cursor}=${oneOff.id}`, keys.sandbox), 400, 'invalid_request_error', 'invalid_cursor');
    }
  });

  it('the merchant cancels: canceled by the merchant, once; a second cancel is 409 subscription_not_active', async () => {
    const sub = await subscription(monthlyLink);
    expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.live), 404, 'invalid_request_error', 'resource_missing');
    const res = await call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.sandbox);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.data).toMatchObject({ id: sub.id, status: 'canceled', canceled_by: 'merchant' });
    expect(res.body.data.canceled_at).toMatch(ISO);
    expect((await call('GET', `/v1/subscriptions/${sub.id}`, keys.sandbox)).body).toEqual(res.body);
    expectError(await call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.sandbox), 409, 'invalid_request_error', 'subscription_not_active');
    // An ended one is not active either.
    const ended = await subscription(monthlyLink);
    await fx.api.pool.query(`update subscriptions set status = 'ended', ended_at = now() where id = $1`, [ended.id]);
    expectError(await call('POST', `/v1/subscriptions/${ended.id}/cancel`, keys.sandbox), 409, 'invalid_request_error', 'subscription_not_active');
    expectError(await call('POST', '/v1/subscriptions/sub_nope/cancel', keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
  });

  it('concurrent cancels: one succeeds, the others are 409', async () => {
    const sub = await subscription(monthlyLink);
    const results = await Promise.all([0, 1, 2].map(() => call('POST', `/v1/subscriptions/${sub.id}/cancel`, keys.sandbox)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
  });

  it("another account's subscription and the other environment's are 404", async () => {
    const sub = await subscription(monthlyLink);
    for (const key of [other.sandbox, keys.live, other.live]) {
      expectError(await call('GET', `/v1/subscriptions/${sub.id}`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    expectError(await call('GET', '/v1/subscriptions/sub_nope', keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
  });

  it('the sandbox test helper that made contract-less subscriptions is gone', async () => {
    expectError(await call('POST', '/v1/test_helpers/subscriptions', keys.sandbox, { price_id: prices.monthly.id, customer_email: email() }), 404, 'invalid_request_error', 'route_not_found');
  });
});
