// Products and their prices over HTTP: create, retrieve, update (returns its prices); an inactive
// product starts no new subscription and leaves the running ones untouched.
import { describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type JsonBody } from '../helpers/http.js';
import { postSubscriptionCheckout, seedSubscriptionFromCheckout, subscriptionChainsFile, testOperatorAddress } from '../helpers/subscriptions.js';

// Spec 2.3 and 2.4, exactly.
const PRODUCT_FIELDS = ['id', 'name', 'description', 'active', 'deletable', 'metadata', 'prices', 'created_at', 'updated_at'].sort();
const PRICE_FIELDS = [
  'id', 'product_id', 'amount', 'amount_atomic', 'currency', 'cadence', 'interval_seconds', 'network', 'chain_id',
  'token_address', 'token_decimals', 'active', 'metadata', 'created_at', 'updated_at',
].sort();

const { fx, keys, other, call } = useApiFixture({ overrides: { CHAINS_FILE: subscriptionChainsFile() }, deps: { operatorAddress: testOperatorAddress } });

async function createProduct(body: Record<string, unknown> = {}, key = keys.sandbox): Promise<JsonBody> {
  const res = await call('POST', '/v1/products', key, { name: 'Pro plan', prices: [{ amount: '9.99', cadence: 'monthly' }], ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}
/** A subscription checkout on the price's payment link (the watcher's subscription is seeded where one must run). */
const subscribe = (linkId: string, email = 'sub@example.test') => postSubscriptionCheckout(fx.api.app, linkId, email);

describe('create and retrieve', () => {
  it('creates a product with its prices, exactly the spec fields', async () => {
    const product = await createProduct({
      name: 'Δοκιμή — Тест 🚀',
      description: 'All features',
      metadata: { tier: 'pro' },
      prices: [
        { amount: '9.99', cadence: 'monthly' },
        { amount: '100.000000000000000001', currency: 'DAI', network: 'sepolia', cadence: 'yearly', metadata: { plan: 'annual' } },
        { amount: '5', interval_seconds: 3600 },
        { amount: '49' },
      ],
    });
    expect(Object.keys(product).sort()).toEqual(PRODUCT_FIELDS);
    expect(product).toMatchObject({ name: 'Δοκιμή — Тест 🚀', description: 'All features', active: true, deletable: true, metadata: { tier: 'pro' } });
    expect(product.id).toMatch(/^prod_/);
    expect(product.prices).toHaveLength(4);
    for (const p of product.prices) {
      expect(Object.keys(p).sort()).toEqual(PRICE_FIELDS);
      expect(p.product_id).toBe(product.id);
      expect(p.active).toBe(true);
    }
    const [monthly, dai, custom, once] = product.prices;
    expect(monthly).toMatchObject({ amount: '9.99', amount_atomic: '9990000', currency: 'USDC', network: 'base-sepolia', chain_id: 84532, token_decimals: 6, cadence: 'monthly', interval_seconds: 2_592_000 });
    expect(monthly.token_address).toBe('0x036CbD53842c5426634e7929541eC2318f3dCF7e');
    expect(dai).toMatchObject({ amount: '100.000000000000000001', amount_atomic: '100000000000000000001', currency: 'DAI', network: 'sepolia', chain_id: 11155111, token_decimals: 18, cadence: 'yearly', interval_seconds: 31_536_000, metadata: { plan: 'annual' } });
    expect(custom).toMatchObject({ cadence: 'custom', interval_seconds: 3600 });
    expect(once).toMatchObject({ cadence: 'one_time', interval_seconds: null });

    expect((await call('GET', `/v1/products/${product.id}`, keys.sandbox_read_only)).body).toEqual({ data: product });
  });

  it('keeps the prices in the order they were given', async () => {
    const amounts = Array.from({ length: 12 }, (_, i) => String(12 - i));
    const product = await createProduct({ prices: amounts.map((amount) => ({ amount })) });
    expect(product.prices.map((p: { amount: string }) => p.amount)).toEqual(amounts);
    const got = await call('GET', `/v1/products/${product.id}`, keys.sandbox);
    expect(got.body.data.prices.map((p: { amount: string }) => p.amount)).toEqual(amounts);
  });

  it('refuses bad prices and writes nothing', async () => {
    const { rows: [before] } = await fx.api.pool.query('select count(*)::int as n from products');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '1', cadence: 'monthly', interval_seconds: 60 }] }), 400, 'invalid_request_error', 'cadence_interval_mismatch');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '1' }, { amount: '1.0000001' }] }), 400, 'invalid_request_error', 'amount_too_precise');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '0' }] }), 400, 'invalid_request_error', 'amount_not_positive');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '1', network: 'ethereum' }] }), 400, 'invalid_request_error', 'network_not_allowed');
    expectError(await call('POST', '/v1/products', keys.live, { name: 'x', prices: [{ amount: '1', network: 'base-sepolia' }] }), 400, 'invalid_request_error', 'network_not_allowed');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: 'x', prices: [{ amount: '1', cadence: 'hourly' }] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', '/v1/products', keys.sandbox, { name: '' }), 400, 'invalid_request_error', 'validation_failed');
    const { rows: [after] } = await fx.api.pool.query('select count(*)::int as n from products');
    expect(after.n).toBe(before.n);
  });
});

describe('update', () => {
  it('changes name, description, metadata and active, and returns the product with its prices', async () => {
    const product = await createProduct({ description: 'old', metadata: { a: '1' } });
    const res = await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { name: 'Продукт', description: 'new', metadata: { b: '2' } });
    expect(res.status).toBe(200);
    const data = res.body.data;
    expect(Object.keys(data).sort()).toEqual(PRODUCT_FIELDS);
    expect(data).toMatchObject({ id: product.id, name: 'Продукт', description: 'new', metadata: { b: '2' }, active: true });
    expect(data.prices).toEqual(product.prices);
    expect(Date.parse(data.updated_at)).toBeGreaterThanOrEqual(Date.parse(product.updated_at));
    // A field left out stays.
    const renamed = await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { name: 'Again' });
    expect(renamed.body.data).toMatchObject({ name: 'Again', description: 'new', metadata: { b: '2' } });
    expect((await call('GET', `/v1/products/${product.id}`, keys.sandbox)).body.data).toEqual(renamed.body.data);

    expectError(await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { active: 'false' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { prices: [] }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { metadata: { k: 1 } }), 400, 'invalid_request_error', 'validation_failed');
  });

  it('inactive refuses new subscriptions and leaves running ones untouched; active allows them again', async () => {
    expect((await call('PATCH', '/v1/account', keys.sandbox, { settlement_address: '0x4444444444444444444444444444444444444444' })).status).toBe(200);
    const product = await createProduct();
    const priceId = product.prices[0].id;
    const link = (await call('POST', '/v1/payment-links', keys.sandbox, { name: 'Pro', price_id: priceId })).body.data;
    const running = await subscribe(link.id);
    expect(running.status).toBe(200);
    const runningId = await seedSubscriptionFromCheckout(fx.api.pool, running.body.checkout_id, { subscriber: '0x7777777777777777777777777777777777777777', onchainId: '1' });
    const runningSub = (await call('GET', `/v1/subscriptions/${runningId}`, keys.sandbox)).body.data;

    const off = await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { active: false });
    expect(off.status).toBe(200);
    expect(off.body.data).toMatchObject({ active: false, deletable: false });
    expect(off.body.data.prices).toHaveLength(1);
    const late = await subscribe(link.id, 'late@example.test');
    expect({ status: late.status, code: (late.body as { error?: { code?: string } }).error?.code }).toEqual({ status: 400, code: 'product_inactive' });
    // A fixed-price link cannot be made on it either.
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', price_id: priceId }), 400, 'invalid_request_error', 'product_inactive');
    expect((await call('GET', `/v1/subscriptions/${runningSub.id}`, keys.sandbox)).body).toEqual({ data: runningSub });
    const { rows } = await fx.api.pool.query('select status, updated_at from subscriptions where price_id = $1', [priceId]);
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe('active');

    const on = await call('PATCH', `/v1/products/${product.id}`, keys.sandbox, { active: true });
    expect(on.body.data.active).toBe(true);
    expect((await subscribe(link.id, 'again@example.test')).status).toBe(200);
    expect((await call('GET', `/v1/subscriptions/${runningSub.id}`, keys.sandbox)).body).toEqual({ data: runningSub });
  });
});

describe('permissions and visibility', () => {
  it('read-only keys cannot write', async () => {
    const product = await createProduct();
    expectError(await call('POST', '/v1/products', keys.sandbox_read_only, { name: 'x' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('PATCH', `/v1/products/${product.id}`, keys.sandbox_read_only, { active: false }), 403, 'permission_error', 'permission_denied');
    expect((await call('GET', `/v1/products/${product.id}`, keys.sandbox)).body.data.active).toBe(true);
  });

  it("another account's product and the other environment's are 404", async () => {
    const product = await createProduct();
    for (const key of [other.sandbox, keys.live]) {
      expectError(await call('GET', `/v1/products/${product.id}`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('PATCH', `/v1/products/${product.id}`, key, { active: false }), 404, 'invalid_request_error', 'resource_missing');
    }
    // Nor can another account link it.
    expectError(await call('POST', '/v1/payment-links', other.sandbox, { name: 'x', price_id: product.prices[0].id }), 400, 'invalid_request_error', 'price_not_found');
    expect((await call('GET', `/v1/products/${product.id}`, keys.sandbox)).body.data).toEqual(product);
  });
});
