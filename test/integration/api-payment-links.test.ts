// Payment links over HTTP: create, retrieve, update (inactive keeps payments), list (every link
// of the key's environment, nothing else), delete (only without payments), the payment helper.
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { startApiFixture } from '../helpers/context.js';
import { expectError, useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';

// Spec 2.5, plus payment_count (issue 20: what max_payments and the delete guard count).
const LINK_FIELDS = [
  'id', 'name', 'type', 'status', 'url', 'price_id', 'min_amount', 'max_amount', 'preset_amount', 'collect_email',
  'collect_name', 'collect_phone', 'collect_address', 'max_payments', 'payment_count', 'after_completion', 'confirmation_message',
  'redirect_url', 'fee_payer', 'created_at', 'updated_at',
].sort();

const { fx, keys, other, call } = useApiFixture();

async function createLink(body: Record<string, unknown> = {}, key = keys.sandbox): Promise<JsonBody> {
  const res = await call('POST', '/v1/payment-links', key, { name: 'Donations', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}
async function pay(linkId: string, body?: Record<string, unknown>, key = keys.sandbox): Promise<ApiResponse> {
  return call('POST', `/v1/test_helpers/payment-links/${linkId}/payments`, key, body);
}
async function paymentRows(linkId: string) {
  const { rows } = await fx.api.pool.query(
    'select id, amount::text as amount, amount_atomic::text as amount_atomic, tx_hash from payment_link_payments where payment_link_id = $1 order by id',
    [linkId],
  );
  return rows;
}
async function createPrice(amount = '15', key = keys.sandbox): Promise<string> {
  const res = await call('POST', '/v1/products', key, { name: 'Ticket', prices: [{ amount }] });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.prices[0].id;
}

describe('create and retrieve', () => {
  it('creates a custom_amount link with exactly the spec fields', async () => {
    const link = await createLink({ min_amount: '1', max_amount: '100.50', preset_amount: '10', collect_email: true, confirmation_message: 'Thanks!' });
    expect(Object.keys(link).sort()).toEqual(LINK_FIELDS);
    expect(link).toMatchObject({
      name: 'Donations',
      type: 'custom_amount',
      status: 'active',
      url: `https://pay.example.test/${link.id}`,
      price_id: null,
      min_amount: '1',
      max_amount: '100.5',
      preset_amount: '10',
      collect_email: true,
      collect_name: false,
      collect_phone: false,
      collect_address: false,
      max_payments: null,
      payment_count: 0,
      after_completion: 'message',
      confirmation_message: 'Thanks!',
      redirect_url: null,
      fee_payer: 'merchant',
    });
    expect(link.id).toMatch(/^plink_/);
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox_read_only)).body).toEqual({ data: link });
  });

  it('creates a fixed_price link from a price', async () => {
    const priceId = await createPrice('15');
    const link = await createLink({ price_id: priceId, fee_payer: 'customer', max_payments: 3, after_completion: 'redirect', redirect_url: 'https://shop.example.test/done' });
    expect(link).toMatchObject({ type: 'fixed_price', price_id: priceId, min_amount: null, fee_payer: 'customer', max_payments: 3, after_completion: 'redirect' });
    const payment = await pay(link.id);
    expect(payment.status).toBe(200);
    expect(payment.body.data).toMatchObject({ payment_link_id: link.id, amount: '15', amount_atomic: '15000000' });
    expect(Object.keys(payment.body.data).sort()).toEqual(['amount', 'amount_atomic', 'created_at', 'customer_email', 'id', 'payment_link_id', 'tx_hash']);
    expect(payment.body.data.tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    // Simulated, never seen on a chain: not a pay_ id, which is a chain payment's.
    expect(payment.body.data.id).toMatch(/^simpay_[0-9A-Za-z]{24}$/);
    expectError(await pay(link.id, { amount: '14' }), 400, 'invalid_request_error', 'amount_mismatch');
  });

  it('refuses inconsistent links', async () => {
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', min_amount: '10', max_amount: '5' }), 400, 'invalid_request_error', 'payment_link_invalid');
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', after_completion: 'redirect' }), 400, 'invalid_request_error', 'payment_link_invalid');
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', type: 'fixed_price' }), 400, 'invalid_request_error', 'payment_link_invalid');
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', price_id: 'price_nope' }), 400, 'invalid_request_error', 'price_not_found');
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', network: 'ethereum' }), 400, 'invalid_request_error', 'network_not_allowed');
    expectError(await call('POST', '/v1/payment-links', keys.live, { name: 'x', network: 'sepolia' }), 400, 'invalid_request_error', 'network_not_allowed');
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', min_amount: '0.0000001' }), 400, 'invalid_request_error', 'amount_too_precise');
    // A price of the other environment or account is not found.
    const livePrice = await createPrice('1', keys.live);
    expectError(await call('POST', '/v1/payment-links', keys.sandbox, { name: 'x', price_id: livePrice }), 400, 'invalid_request_error', 'price_not_found');
    expectError(await call('POST', '/v1/payment-links', other.live, { name: 'x', price_id: livePrice }), 400, 'invalid_request_error', 'price_not_found');
  });
});

describe('list', () => {
  it("returns every link of the key's environment and account, and only those", async () => {
    const fresh = await startApiFixture();
    try {
      const k = fresh.merchant.keys;
      const make = async (key: string, name: string) => {
        const res = await fresh.api.app.inject({ method: 'POST', url: '/v1/payment-links', headers: { 'api-key': key }, payload: { name } });
        expect(res.statusCode).toBe(200);
        return res.json().data;
      };
      const list = async (key: string) => {
        const res = await fresh.api.app.inject({ method: 'GET', url: '/v1/payment-links', headers: { 'api-key': key } });
        expect(res.statusCode).toBe(200);
        return res.json().data as { id: string }[];
      };
      expect(await list(k.sandbox)).toEqual([]);
      const sandboxLinks: { id: string }[] = [];
      for (let i = 0; i < 55; i++) sandboxLinks.push(await make(k.sandbox, `sandbox ${i}`));
      const liveLinks = [await make(k.live, 'live 1'), await make(k.live, 'live 2')];
      const stranger = (await provisionMerchant(fresh.api.pool, { id: newId('acct'), name: 'Stranger', email: null })).keys;
      await make(stranger.sandbox, 'not mine');

      const mine = await list(k.sandbox);
      expect(mine.map((l) => l.id).sort()).toEqual(sandboxLinks.map((l) => l.id).sort());
      expect(mine.find((l) => l.id === sandboxLinks[7].id)).toEqual(sandboxLinks[7]);
      for (const l of mine) expect(Object.keys(l).sort()).toEqual(LINK_FIELDS);
      expect((await list(k.sandbox_read_only)).map((l) => l.id).sort()).toEqual(sandboxLinks.map((l) => l.id).sort());
      expect((await list(k.live)).map((l) => l.id).sort()).toEqual(liveLinks.map((l) => l.id).sort());
      expect((await list(stranger.sandbox)).map((l) => (l as { name?: string }).name)).toEqual(['not mine']);
      // Inactive links are still listed.
      await fresh.api.app.inject({ method: 'PATCH', url: `/v1/payment-links/${liveLinks[0].id}`, headers: { 'api-key': k.live }, payload: { status: 'inactive' } });
      expect((await list(k.live)).map((l) => l.id).sort()).toEqual(liveLinks.map((l) => l.id).sort());
    } finally {
      await fresh.close();
    }
  });
});

describe('update', () => {
  it('changes the documented fields and nothing else', async () => {
    const link = await createLink({ min_amount: '2' });
    const res = await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, {
      name: 'Σπόνσορες',
      collect_email: true,
      collect_name: true,
      confirmation_message: 'Спасибо 🙏',
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.data).sort()).toEqual(LINK_FIELDS);
    expect(res.body.data).toMatchObject({ ...link, name: 'Σπόνσορες', collect_email: true, collect_name: true, confirmation_message: 'Спасибо 🙏', updated_at: expect.any(String) });
    expectError(await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { after_completion: 'redirect' }), 400, 'invalid_request_error', 'payment_link_invalid');
    const redirect = await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { after_completion: 'redirect', redirect_url: 'https://example.test/ok' });
    expect(redirect.body.data).toMatchObject({ after_completion: 'redirect', redirect_url: 'https://example.test/ok' });
    expectError(await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { min_amount: '1' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { status: 'archived' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { redirect_url: 'javascript:alert(1)' }), 400, 'invalid_request_error', 'validation_failed');
  });

  it('inactive closes the link and keeps every payment; active reopens it', async () => {
    const link = await createLink({ min_amount: '1', max_amount: '50' });
    expect((await pay(link.id, { amount: '5', customer_email: 'a@example.test' })).status).toBe(200);
    expect((await pay(link.id, { amount: '7.25' })).status).toBe(200);
    expectError(await pay(link.id, { amount: '51' }), 400, 'invalid_request_error', 'amount_out_of_range');
    expectError(await pay(link.id), 400, 'invalid_request_error', 'validation_failed');
    const before = await paymentRows(link.id);
    expect(before.map((p) => p.amount).sort()).toEqual(['5', '7.25']);

    const closed = await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { status: 'inactive' });
    expect(closed.status).toBe(200);
    expect(closed.body.data.status).toBe('inactive');
    expect(await paymentRows(link.id)).toEqual(before);
    expectError(await pay(link.id, { amount: '5' }), 400, 'invalid_request_error', 'payment_link_inactive');
    expect(await paymentRows(link.id)).toEqual(before);

    const reopened = await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { status: 'active' });
    expect(reopened.body.data.status).toBe('active');
    expect((await pay(link.id, { amount: '1' })).status).toBe(200);
    expect(await paymentRows(link.id)).toHaveLength(3);
  });

  it('max_payments caps the payments', async () => {
    const link = await createLink({ preset_amount: '3', max_payments: 2 });
    expect((await pay(link.id)).body.data.amount).toBe('3');
    expect((await pay(link.id)).status).toBe(200);
    expectError(await pay(link.id), 400, 'invalid_request_error', 'payment_link_exhausted');
    expect(await paymentRows(link.id)).toHaveLength(2);
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).body.data.payment_count).toBe(2);
  });
});

describe('delete', () => {
  it('deletes a link that never took a payment', async () => {
    const link = await createLink();
    const res = await call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { id: link.id, deleted: true } });
    expectError(await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expectError(await call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expect((await call('GET', '/v1/payment-links', keys.sandbox)).body.data.map((l: { id: string }) => l.id)).not.toContain(link.id);
  });

  it('refuses with 409 a link that took a payment, leaving link and payments untouched (inactive too)', async () => {
    const link = await createLink({ preset_amount: '4' });
    expect((await pay(link.id)).status).toBe(200);
    const before = await paymentRows(link.id);
    expectError(await call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox), 409, 'invalid_request_error', 'payment_link_has_payments');
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).body).toEqual({ data: { ...link, payment_count: 1 } });
    expect(await paymentRows(link.id)).toEqual(before);

    const closed = (await call('PATCH', `/v1/payment-links/${link.id}`, keys.sandbox, { status: 'inactive' })).body.data;
    expectError(await call('DELETE', `/v1/payment-links/${link.id}`, keys.sandbox), 409, 'invalid_request_error', 'payment_link_has_payments');
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).body).toEqual({ data: closed });
    expect(await paymentRows(link.id)).toEqual(before);
  });
});

describe('permissions and visibility', () => {
  it('read-only keys cannot write; live keys cannot use the payment helper', async () => {
    const link = await createLink();
    const ro = keys.sandbox_read_only;
    expectError(await call('POST', '/v1/payment-links', ro, { name: 'x' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('PATCH', `/v1/payment-links/${link.id}`, ro, { name: 'y' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('DELETE', `/v1/payment-links/${link.id}`, ro), 403, 'permission_error', 'permission_denied');
    expectError(await pay(link.id, { amount: '1' }, ro), 403, 'permission_error', 'permission_denied');
    const liveLink = await createLink({}, keys.live);
    expectError(await pay(liveLink.id, { amount: '1' }, keys.live), 403, 'permission_error', 'live_mode_forbidden');
    expect(await paymentRows(liveLink.id)).toEqual([]);
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).body.data).toEqual(link);
  });

  it("another account's link and the other environment's are 404", async () => {
    const link = await createLink();
    for (const key of [other.sandbox, keys.live]) {
      expectError(await call('GET', `/v1/payment-links/${link.id}`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('PATCH', `/v1/payment-links/${link.id}`, key, { status: 'inactive' }), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('DELETE', `/v1/payment-links/${link.id}`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    expectError(await pay(link.id, { amount: '1' }, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expect((await call('GET', `/v1/payment-links/${link.id}`, keys.sandbox)).body.data).toEqual(link);
  });
});
