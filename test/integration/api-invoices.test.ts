// Invoices over HTTP: create, retrieve, update, send, reminders (on/off and timeline), the
// sandbox pay helper, and the rules the spec puts on them.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { expectError as expectApiError, useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';

// Spec 2.1, plus the on-chain payment fields (docs/payments.md): what is paid, what remains, how to pay it.
const INVOICE_FIELDS = [
  'id', 'code', 'reference', 'status', 'amount', 'amount_atomic', 'fee_atomic', 'currency', 'network', 'chain_id',
  'period_start', 'period_end', 'attempt_count', 'next_attempt_at', 'paid_at', 'sent_at', 'reminders_enabled',
  'last_reminder_at', 'failure_code', 'failure_message', 'metadata', 'created_at', 'updated_at',
  'amount_paid_atomic', 'amount_remaining_atomic', 'payment_instructions',
].sort();
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

const { fx, keys, other, call } = useApiFixture();
const expectError = (res: ApiResponse, status: number, type: string, code: string) =>
  expectApiError(res, status, type, code, { messageIsString: true, noData: true });
async function createInvoice(body: Record<string, unknown> = {}, key = keys.sandbox): Promise<JsonBody> {
  const res = await call('POST', '/v1/invoices', key, { customer_email: 'payer@example.test', amount: '25', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}
async function stored(id: string) {
  const { rows } = await fx.api.pool.query(
    `select amount::text as amount, amount_atomic::text as amount_atomic, fee_atomic::text as fee_atomic, memo, footer, tax_id,
       due_at, status, code from invoices where id = $1`,
    [id],
  );
  return rows[0];
}
async function storedLines(id: string) {
  const { rows } = await fx.api.pool.query(
    'select position, description, quantity, unit_amount::text as unit_amount from invoice_line_items where invoice_id = $1 order by position',
    [id],
  );
  return rows;
}

describe('create and retrieve', () => {
  it('creates a draft with exactly the Invoice fields of the spec', async () => {
    const inv = await createInvoice({ amount: '12.50', metadata: { order: '42' }, memo: 'thanks', due_at: '2030-01-15T00:00:00Z' });
    expect(Object.keys(inv).sort()).toEqual(INVOICE_FIELDS);
    expect(inv).toMatchObject({
      status: 'draft',
      code: null,
      amount: '12.5',
      amount_atomic: '12500000',
      fee_atomic: '62500', // 50 bps
      currency: 'USDC',
      network: 'base-sepolia',
      chain_id: 84532,
      attempt_count: 0,
      sent_at: null,
      paid_at: null,
      reminders_enabled: true,
      metadata: { order: '42' },
      failure_code: null,
    });
    expect(inv.id).toMatch(/^inv_[0-9A-Za-z]{24}$/);
    expect(inv.reference).toMatch(/^[0-9A-Za-z]{20}$/);
    expect(inv.created_at).toMatch(ISO);
    expect(inv.updated_at).toMatch(ISO);
    for (const hidden of ['due_at', 'memo', 'footer', 'tax_id', 'line_items', 'customer_email']) expect(inv).not.toHaveProperty(hidden);

    const got = await call('GET', `/v1/invoices/${inv.id}`, keys.sandbox);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: inv });
    // The read-only key reads.
    expect((await call('GET', `/v1/invoices/${inv.id}`, keys.sandbox_read_only)).body).toEqual({ data: inv });
  });

  it('computes amount_atomic and fee_atomic exactly for 6 and 18 decimal tokens', async () => {
    const usdc = await createInvoice({ network: 'sepolia', currency: 'USDC', amount: '999999999999999.999999' });
    expect(usdc).toMatchObject({ currency: 'USDC', network: 'sepolia', chain_id: 11155111, amount: '999999999999999.999999' });
    expect(usdc.amount_atomic).toBe('999999999999999999999');
    expect(usdc.fee_atomic).toBe('5000000000000000000'); // 4999999999999999999.995 rounds half up

    const dai = await createInvoice({ network: 'sepolia', currency: 'dai', amount: '1.000000000000000001' });
    expect(dai).toMatchObject({ currency: 'DAI', chain_id: 11155111, amount: '1.000000000000000001' });
    expect(dai.amount_atomic).toBe('1000000000000000001');
    expect(dai.fee_atomic).toBe('5000000000000000'); // .005 rounds down

    const big = await createInvoice({ network: 'sepolia', currency: 'DAI', amount: '123456789012345.123456789012345678' });
    expect(big.amount_atomic).toBe('123456789012345123456789012345678');
    expect(big.fee_atomic).toBe('617283945061725617283945061728'); // ...728.39 -> 728
    expect(await stored(big.id)).toMatchObject({ amount: '123456789012345.123456789012345678', amount_atomic: big.amount_atomic });

    const half = await createInvoice({ amount: '0.0001' }); // 100 atomic x 50 bps = 0.5 -> 1
    expect(half).toMatchObject({ amount_atomic: '100', fee_atomic: '1' });
    expect((await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'a@example.test', network: 'sepolia', currency: 'USDC', amount: '1.0000001' })).body.error.code).toBe('amount_too_precise');
  });

  it('creates a draft from line items; a disagreeing amount is amount_mismatch', async () => {
    const lines = [
      { description: 'Seat', quantity: 4, unit_amount: '12.25' },
      { description: 'Setup', quantity: 1, unit_amount: '0.5' },
    ];
    const inv = await createInvoice({ amount: undefined, line_items: lines });
    expect(inv).toMatchObject({ amount: '49.5', amount_atomic: '49500000', fee_atomic: '247500' });
    expect(await storedLines(inv.id)).toEqual([
      { position: 1, description: 'Seat', quantity: 4, unit_amount: '12.25' },
      { position: 2, description: 'Setup', quantity: 1, unit_amount: '0.5' },
    ]);
    expect((await createInvoice({ amount: '49.50', line_items: lines })).amount).toBe('49.5');
    expectError(await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'a@example.test', amount: '50', line_items: lines }), 400, 'invalid_request_error', 'amount_mismatch');
  });

  it('creates a draft without an amount (null money fields)', async () => {
    const res = await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'noamount@example.test' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ amount: null, amount_atomic: null, fee_atomic: null, status: 'draft' });
  });

  it('keeps sandbox keys on test chains and live keys on production chains', async () => {
    for (const network of ['ethereum', 'base', 'polygon']) {
      expectError(await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'a@example.test', amount: '1', network }), 400, 'invalid_request_error', 'network_not_allowed');
    }
    for (const network of ['sepolia', 'base-sepolia', 'polygon-amoy']) {
      expectError(await call('POST', '/v1/invoices', keys.live, { customer_email: 'a@example.test', amount: '1', network }), 400, 'invalid_request_error', 'network_not_allowed');
    }
    expectError(await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'a@example.test', amount: '1', network: 'solana' }), 400, 'invalid_request_error', 'unknown_network');
    expectError(await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'a@example.test', amount: '1', currency: 'USDT' }), 400, 'invalid_request_error', 'unsupported_token');
    const live = await createInvoice({ network: 'ethereum', currency: 'DAI', amount: '2' }, keys.live);
    expect(live).toMatchObject({ network: 'ethereum', chain_id: 1, currency: 'DAI', amount_atomic: '2000000000000000000' });
    // ...and the objects of one environment are invisible from the other.
    expectError(await call('GET', `/v1/invoices/${live.id}`, keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
  });
});

describe('update', () => {
  it('edits a draft; input-only fields are stored, not echoed', async () => {
    const inv = await createInvoice({ amount: '10' });
    const res = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, {
      amount: '30.5',
      memo: 'Μνήμη — памятка 🧾',
      footer: 'Paid in USDC',
      tax_id: 'FR123',
      due_at: '2031-06-01T12:00:00Z',
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.data).sort()).toEqual(INVOICE_FIELDS);
    expect(res.body.data).toMatchObject({ id: inv.id, status: 'draft', amount: '30.5', amount_atomic: '30500000', fee_atomic: '152500' });
    expect(Date.parse(res.body.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(inv.updated_at));
    const row = await stored(inv.id);
    expect(row).toMatchObject({ memo: 'Μνήμη — памятка 🧾', footer: 'Paid in USDC', tax_id: 'FR123', amount: '30.5' });
    expect((row.due_at as Date).toISOString()).toBe('2031-06-01T12:00:00.000Z');
    // Fields left out stay as they were.
    const again = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { footer: 'New footer' });
    expect(again.body.data.amount).toBe('30.5');
    expect(await stored(inv.id)).toMatchObject({ memo: 'Μνήμη — памятка 🧾', footer: 'New footer', tax_id: 'FR123' });
  });

  it('line_items set the total; amount and line_items together must agree', async () => {
    const inv = await createInvoice({ amount: '1' });
    const lines = [
      { description: 'Widget', quantity: 3, unit_amount: '2.50' },
      { description: 'Shipping', quantity: 1, unit_amount: '0.000001' },
    ];
    const set = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { line_items: lines });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ amount: '7.500001', amount_atomic: '7500001', fee_atomic: '37500' });
    expect(set.body.data).not.toHaveProperty('line_items');
    expect(await storedLines(inv.id)).toEqual([
      { position: 1, description: 'Widget', quantity: 3, unit_amount: '2.5' },
      { position: 2, description: 'Shipping', quantity: 1, unit_amount: '0.000001' },
    ]);

    const mismatch = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { amount: '7.5', line_items: [{ description: 'X', quantity: 2, unit_amount: '4' }] });
    expectError(mismatch, 400, 'invalid_request_error', 'amount_mismatch');
    // Nothing of the refused edit was applied.
    expect((await stored(inv.id)).amount).toBe('7.500001');
    expect(await storedLines(inv.id)).toHaveLength(2);

    // amount alone must equal the current lines' sum.
    expectError(await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { amount: '100' }), 400, 'invalid_request_error', 'amount_mismatch');
    const agree = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { amount: '8', line_items: [{ description: 'X', quantity: 2, unit_amount: '4' }] });
    expect(agree.status).toBe(200);
    expect(agree.body.data).toMatchObject({ amount: '8', amount_atomic: '8000000' });
    // Dropping the lines with an explicit amount.
    const drop = await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { amount: '5', line_items: [] });
    expect(drop.body.data.amount).toBe('5');
    expect(await storedLines(inv.id)).toEqual([]);
  });

  it('refuses every change of a sent invoice with invoice_not_editable and keeps it as sent', async () => {
    const inv = await createInvoice({ amount: '40', memo: 'original' });
    const sent = await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
    expect(sent.status).toBe(200);
    const before = await stored(inv.id);
    const edits: Record<string, unknown>[] = [
      { amount: '41' },
      { memo: 'changed' },
      { footer: 'changed' },
      { tax_id: 'changed' },
      { due_at: '2040-01-01T00:00:00Z' },
      { line_items: [{ description: 'x', quantity: 1, unit_amount: '40' }] },
      { line_items: [] },
      {},
    ];
    for (const edit of edits) {
      expectError(await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, edit), 400, 'invalid_request_error', 'invoice_not_editable');
    }
    expect(await stored(inv.id)).toEqual(before);
    expect(await storedLines(inv.id)).toEqual([]);
    expect((await call('GET', `/v1/invoices/${inv.id}`, keys.sandbox)).body.data).toEqual(sent.body.data);

    // Paid is no more editable.
    await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
    expectError(await call('PATCH', `/v1/invoices/${inv.id}`, keys.sandbox, { memo: 'x' }), 400, 'invalid_request_error', 'invoice_not_editable');
  });
});

describe('send', () => {
  it('turns a draft into open with a code and sent_at, and records the email in deliveries and the outbox', async () => {
    const inv = await createInvoice({ amount: '99.99' });
    const res = await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
    expect(res.status).toBe(200);
    const data = res.body.data;
    expect(Object.keys(data).sort()).toEqual(INVOICE_FIELDS);
    expect(data).toMatchObject({ id: inv.id, status: 'open', amount: '99.99', amount_atomic: '99990000' });
    expect(data.code).toMatch(/^TEST-INV-\d{6}$/);
    expect(data.sent_at).toMatch(ISO);
    expect(data.updated_at).toBe(data.sent_at);

    const { rows: deliveries } = await fx.api.pool.query('select id, kind, status, slot_at from deliveries where invoice_id = $1', [inv.id]);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ kind: 'invoice', status: 'pending' });
    expect((deliveries[0].slot_at as Date).toISOString()).toBe(data.sent_at);
    const { rows: outbox } = await fx.api.pool.query(`select job_name, payload from outbox where payload->>'invoiceId' = $1`, [inv.id]);
    expect(outbox).toEqual([{ job_name: 'invoice.send', payload: { invoiceId: inv.id, deliveryId: deliveries[0].id } }]);

    // A second send is refused and writes nothing.
    expectError(await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox), 400, 'invalid_request_error', 'invoice_already_sent');
    expect((await fx.api.pool.query('select 1 from deliveries where invoice_id = $1', [inv.id])).rowCount).toBe(1);
    expect((await call('GET', `/v1/invoices/${inv.id}`, keys.sandbox)).body.data.code).toBe(data.code);
  });

  it('accepts an empty JSON body and refuses a draft without amount', async () => {
    const inv = await createInvoice();
    const res = await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${inv.id}/send`, headers: { 'api-key': keys.sandbox, 'content-type': 'application/json' }, payload: '' });
    expect(res.statusCode).toBe(200);

    const empty = await call('POST', '/v1/invoices', keys.sandbox, { customer_email: 'x@example.test' });
    expectError(await call('POST', `/v1/invoices/${empty.body.data.id}/send`, keys.sandbox), 400, 'invalid_request_error', 'invoice_amount_missing');
    expect((await stored(empty.body.data.id)).status).toBe('draft');
  });

  it('numbers live and sandbox invoices separately', async () => {
    const live = await createInvoice({ amount: '1' }, keys.live);
    const res = await call('POST', `/v1/invoices/${live.id}/send`, keys.live);
    expect(res.status).toBe(200);
    expect(res.body.data.code).toBe('INV-000001');
  });
});

describe('reminders', () => {
  it('turns reminders off and on for an open invoice', async () => {
    const inv = await createInvoice({ due_at: new Date(Date.now() + 10 * 86_400_000).toISOString() });
    await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
    const off = await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: false });
    expect(off.status).toBe(200);
    expect(Object.keys(off.body.data).sort()).toEqual(INVOICE_FIELDS);
    expect(off.body.data).toMatchObject({ id: inv.id, status: 'open', reminders_enabled: false });
    expect((await call('GET', `/v1/invoices/${inv.id}`, keys.sandbox)).body.data.reminders_enabled).toBe(false);
    const on = await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: true });
    expect(on.body.data.reminders_enabled).toBe(true);

    expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, {}), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: 'false' }), 400, 'invalid_request_error', 'validation_failed');
    expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox_read_only, { enabled: false }), 403, 'permission_error', 'permission_denied');

    // Paid: reminders are closed.
    const paid = await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
    expect(paid.body.data.status).toBe('paid');
    expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: true }), 400, 'invalid_request_error', 'invoice_reminders_closed');
  });

  it.skipIf(!existsSync(new URL('../../src/domain/reminder-schedule.ts', import.meta.url)))(
    'GET /reminders shows the planned slots of an open invoice and none once paid',
    async () => {
      const dueAt = new Date(Date.now() + 10 * 86_400_000);
      const inv = await createInvoice({ due_at: dueAt.toISOString() });
      const draft = await call('GET', `/v1/invoices/${inv.id}/reminders`, keys.sandbox_read_only);
      expect(draft.status).toBe(200);
      expect(draft.body.data).toMatchObject({ invoice_id: inv.id, status: 'draft', upcoming: [], past: [] });

      await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
      const open = await call('GET', `/v1/invoices/${inv.id}/reminders`, keys.sandbox);
      expect(open.status).toBe(200);
      const t = open.body.data;
      expect(Object.keys(t).sort()).toEqual(['due_at', 'invoice_id', 'past', 'reminders_enabled', 'status', 'time_zone', 'upcoming']);
      expect(t).toMatchObject({ invoice_id: inv.id, reminders_enabled: true, status: 'open', due_at: dueAt.toISOString(), time_zone: 'Europe/Paris', past: [] });
      // Default policy: 3, 2, 1 days before (09:00 local), then 4 after.
      expect(t.upcoming.map((s: { kind: string }) => s.kind)).toEqual([
        'reminder_before', 'reminder_before', 'reminder_before', 'reminder_after', 'reminder_after', 'reminder_after', 'reminder_after',
      ]);
      const times = t.upcoming.map((s: { scheduled_for: string }) => Date.parse(s.scheduled_for));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      expect(times[0]).toBeGreaterThan(Date.now());
      expect(times[2]).toBeLessThan(dueAt.getTime());
      expect(times[3]).toBeGreaterThan(dueAt.getTime());

      await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: false });
      expect((await call('GET', `/v1/invoices/${inv.id}/reminders`, keys.sandbox)).body.data).toMatchObject({ reminders_enabled: false, upcoming: [] });
      await call('POST', `/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: true });
      await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
      expect((await call('GET', `/v1/invoices/${inv.id}/reminders`, keys.sandbox)).body.data).toMatchObject({ status: 'paid', upcoming: [] });
    },
  );
});

describe('pay test helper', () => {
  it('pays an open invoice once; refuses drafts, and live keys get 403', async () => {
    const inv = await createInvoice({ amount: '5' });
    expectError(await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox), 400, 'invalid_request_error', 'invoice_not_payable');
    await call('POST', `/v1/invoices/${inv.id}/send`, keys.sandbox);
    const paid = await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
    expect(paid.status).toBe(200);
    expect(Object.keys(paid.body.data).sort()).toEqual(INVOICE_FIELDS);
    expect(paid.body.data).toMatchObject({ status: 'paid', attempt_count: 1 });
    expect(paid.body.data.paid_at).toMatch(ISO);
    expectError(await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox), 400, 'invalid_request_error', 'invoice_not_payable');
    expectError(await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.live), 403, 'permission_error', 'live_mode_forbidden');
    expectError(await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    expectError(await call('POST', '/v1/test_helpers/invoices/inv_nope/pay', keys.sandbox), 404, 'invalid_request_error', 'resource_missing');
  });
});

describe('permissions and visibility', () => {
  it('a read-only key gets 403 permission_error on every write and changes nothing', async () => {
    const inv = await createInvoice({ amount: '3' });
    const ro = keys.sandbox_read_only;
    expectError(await call('POST', '/v1/invoices', ro, { customer_email: 'a@example.test', amount: '1' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('PATCH', `/v1/invoices/${inv.id}`, ro, { amount: '4' }), 403, 'permission_error', 'permission_denied');
    expectError(await call('POST', `/v1/invoices/${inv.id}/send`, ro), 403, 'permission_error', 'permission_denied');
    expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, ro, { enabled: false }), 403, 'permission_error', 'permission_denied');
    expect(await stored(inv.id)).toMatchObject({ amount: '3', status: 'draft', code: null });
    expect((await call('GET', `/v1/invoices/${inv.id}`, ro)).status).toBe(200);
  });

  it("another account's invoice and the other environment's are 404, never 403", async () => {
    const inv = await createInvoice({ amount: '3' });
    for (const key of [other.sandbox, keys.live, other.live]) {
      expectError(await call('GET', `/v1/invoices/${inv.id}`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('PATCH', `/v1/invoices/${inv.id}`, key, { amount: '9' }), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('POST', `/v1/invoices/${inv.id}/send`, key), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('POST', `/v1/invoices/${inv.id}/reminders`, key, { enabled: false }), 404, 'invalid_request_error', 'resource_missing');
      expectError(await call('GET', `/v1/invoices/${inv.id}/reminders`, key), 404, 'invalid_request_error', 'resource_missing');
    }
    expectError(await call('POST', `/v1/test_helpers/invoices/${inv.id}/pay`, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    expect(await stored(inv.id)).toMatchObject({ amount: '3', status: 'draft' });
  });
});
