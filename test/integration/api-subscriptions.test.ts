// Subscriptions: started with the sandbox helper, retrieved with their period dates.
import { beforeAll, describe, expect, it } from 'vitest';
import { expectError, useApiFixture } from '../helpers/http.js';

// Spec 2.6, exactly.
const SUBSCRIPTION_FIELDS = [
  'id', 'status', 'mode', 'amount', 'amount_atomic', 'currency', 'cadence', 'interval_seconds', 'network', 'chain_id',
  'contract_address', 'onchain_id', 'platform_fee_bps', 'started_at', 'current_period_start', 'next_charge_at', 'ends_at',
].sort();
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

const { fx, keys, other, call } = useApiFixture({ otherMerchant: { platformFeeBps: 125 } });
let prices: { monthly: string; daiWeekly: string; custom: string; once: string; live: string };

const subscribe = (priceId: string, key = keys.sandbox) =>
  call('POST', '/v1/test_helpers/subscriptions', key, { price_id: priceId, customer_email: 'subscriber@example.test' });

beforeAll(async () => {
  const product = await call('POST', '/v1/products', keys.sandbox, {
    name: 'Plan',
    prices: [
      { amount: '9.99', cadence: 'monthly' },
      { amount: '0.5', currency: 'DAI', network: 'sepolia', cadence: 'weekly' },
      { amount: '1', interval_seconds: 120 },
      { amount: '30' },
    ],
  });
  const live = await call('POST', '/v1/products', keys.live, { name: 'Plan', prices: [{ amount: '9.99', cadence: 'monthly' }] });
  const [monthly, daiWeekly, custom, once] = product.body.data.prices.map((p: { id: string }) => p.id);
  prices = { monthly, daiWeekly, custom, once, live: live.body.data.prices[0].id };
});

describe('start and retrieve', () => {
  it('starts a subscription on a recurring price and retrieves it with its period dates', async () => {
    const started = await subscribe(prices.monthly);
    expect(started.status).toBe(200);
    const sub = started.body.data;
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
      // The helper's subscriptions are not on any chain: no made-up contract address.
      contract_address: '0x0000000000000000000000000000000000000000',
      platform_fee_bps: 50,
      ends_at: null,
    });
    expect(sub.id).toMatch(/^sub_/);
    expect(sub.onchain_id).toMatch(/^0x[0-9a-f]{32}$/);
    for (const f of ['started_at', 'current_period_start', 'next_charge_at']) expect(sub[f]).toMatch(ISO);
    expect(sub.current_period_start).toBe(sub.started_at);
    expect(Date.parse(sub.next_charge_at) - Date.parse(sub.current_period_start)).toBe(2_592_000_000);

    const got = await call('GET', `/v1/subscriptions/${sub.id}`, keys.sandbox_read_only);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: sub });
  });

  it('carries the token of its price (18-decimal DAI on sepolia) and custom intervals', async () => {
    const dai = (await subscribe(prices.daiWeekly)).body.data;
    expect(dai).toMatchObject({ currency: 'DAI', network: 'sepolia', chain_id: 11155111, amount: '0.5', amount_atomic: '500000000000000000', cadence: 'weekly', interval_seconds: 604_800 });
    const custom = (await subscribe(prices.custom)).body.data;
    expect(custom).toMatchObject({ cadence: 'custom', interval_seconds: 120 });
    expect(Date.parse(custom.next_charge_at) - Date.parse(custom.current_period_start)).toBe(120_000);
  });

  it('refuses one-time and unknown prices', async () => {
    expectError(await subscribe(prices.once), 400, 'invalid_request_error', 'price_not_recurring');
    expectError(await subscribe('price_doesnotexist'), 400, 'invalid_request_error', 'price_not_found');
    expectError(await call('POST', '/v1/test_helpers/subscriptions', keys.sandbox, { price_id: prices.monthly }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', '/v1/test_helpers/subscriptions', keys.sandbox, { price_id: prices.monthly, customer_email: 'not-an-email' }), 400, 'invalid_request_error', 'validation_failed');
  });

  it('the helper is sandbox-only and needs a full key', async () => {
    expectError(await subscribe(prices.live, keys.live), 403, 'permission_error', 'live_mode_forbidden');
    expectError(await subscribe(prices.monthly, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from subscriptions where environment = 'live'`);
    expect(rows[0].n).toBe(0);
  });

  it("takes the platform fee of the account (125 bps for the other merchant)", async () => {
    const product = await call('POST', '/v1/products', other.sandbox, { name: 'Theirs', prices: [{ amount: '3', cadence: 'daily' }] });
    const sub = await subscribe(product.body.data.prices[0].id, other.sandbox);
    expect(sub.body.data).toMatchObject({ platform_fee_bps: 125, interval_seconds: 86_400, amount_atomic: '3000000' });
    const inv = await call('POST', '/v1/invoices', other.sandbox, { customer_email: 'a@example.test', amount: '1' });
    expect(inv.body.data).toMatchObject({ amount_atomic: '1000000', fee_atomic: '12500' });
  });

  it('deactivating a product races subscription starts without errors, and refuses every later start', async () => {
    for (let round = 0; round < 10; round++) {
      const product = (await call('POST', '/v1/products', keys.sandbox, { name: `race ${round}`, prices: [{ amount: '1', cadence: 'daily' }] })).body.data;
      const priceId = product.prices[0].id;
      const [off, ...starts] = await Promise.all([
        call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { active: false }),
        subscribe(priceId),
        subscribe(priceId),
      ]);
      expect(off.status).toBe(200);
      for (const s of starts) {
        if (s.status !== 200) expectError(s, 400, 'invalid_request_error', 'product_inactive');
      }
      const { rows } = await fx.api.pool.query('select count(*)::int as n from subscriptions where price_id = $1', [priceId]);
      expect(rows[0].n).toBe(starts.filter((s) => s.status === 200).length);
      expectError(await subscribe(priceId), 400, 'invalid_request_error', 'product_inactive');
    }
  });

  it("another account's subscription and the other environment's are 404", async () => {
    const sub = (await subscribe(prices.monthly)).body.data;
    for (const key of [other.sandbox, keys.live, other.live]) {
      expectError(await call('GET', `/v1/subscriptions/${sub.id}`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    expectError(await call('GET', '/v1/subscriptions/sub_nope', keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
    // A price of another account is not found by the helper either.
    expectError(await subscribe(prices.monthly, other.sandbox), 400, 'invalid_request_error', 'price_not_found');
  });
});
