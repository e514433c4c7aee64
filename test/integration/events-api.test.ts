// Events over HTTP: every kind is written in the same transaction as its change (status changes
// by a trigger, whoever the writer: the API or plain SQL), data.object is the object as the API
// presents it, and the list paginates newest first, per account and environment.
import { describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type JsonBody } from '../helpers/http.js';

const { fx, keys, other, call, get, post, patch } = useApiFixture();

async function createInvoice(key = keys.sandbox, body: Record<string, unknown> = {}): Promise<JsonBody> {
  const res = await post('/v1/invoices', key, { customer_email: 'ada@example.test', amount: '12.50', due_at: '2030-01-01T00:00:00Z', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

/** Events of one object, oldest first, straight from the API. */
async function eventsOf(objectId: string, key = keys.sandbox): Promise<JsonBody[]> {
  const res = await get('/v1/events?limit=100', key);
  expect(res.status).toBe(200);
  return (res.body.data as unknown as JsonBody[]).filter((e) => e.data.object.id === objectId).reverse();
}

const sql = (text: string, values: unknown[]) => fx.api.pool.query(text, values);

describe('invoice events', () => {
  it('created, updated, sent: each once, each carrying the invoice exactly as GET shows it at that moment', async () => {
    const inv = await createInvoice();
    let events = await eventsOf(inv.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created']);
    expect(events[0].data.object).toEqual(inv);
    expect(events[0]).toMatchObject({ environment: 'sandbox' });
    expect(events[0].id).toMatch(/^evt_[0-9A-Za-z]{24}$/);
    expect(Object.keys(events[0]).sort()).toEqual(['created_at', 'data', 'environment', 'id', 'type']);

    const edited = await patch(`/v1/invoices/${inv.id}`, keys.sandbox, { amount: '99.99' });
    expect(edited.status).toBe(200);
    const sent = await post(`/v1/invoices/${inv.id}/send`, keys.sandbox);
    expect(sent.status).toBe(200);
    events = await eventsOf(inv.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created', 'invoice.updated', 'invoice.sent']);
    expect(events[1].data.object).toEqual(edited.body.data);
    expect(events[2].data.object).toEqual(sent.body.data);
    expect(events[2].data.object.status).toBe('open');
  });

  it('a refused change writes no event', async () => {
    const inv = await createInvoice();
    await post(`/v1/invoices/${inv.id}/send`, keys.sandbox);
    const refused = await patch(`/v1/invoices/${inv.id}`, keys.sandbox, { amount: '1' });
    expectError(refused, 400, 'invalid_request_error', 'invoice_not_editable');
    expect((await eventsOf(inv.id)).map((e) => e.type)).toEqual(['invoice.created', 'invoice.sent']);
  });

  it('paid, overdue and void made by plain SQL each emit exactly one event, with the row as it became', async () => {
    const a = await createInvoice();
    await post(`/v1/invoices/${a.id}/send`, keys.sandbox);
    await sql(`update invoices set status = 'overdue', updated_at = now() where id = $1`, [a.id]);
    await sql(`update invoices set status = 'paid', paid_at = now(), updated_at = now() where id = $1`, [a.id]);
    // The same status again, and an unrelated column: no new event.
    await sql(`update invoices set status = 'paid' where id = $1`, [a.id]);
    await sql(`update invoices set last_reminder_at = now() where id = $1`, [a.id]);
    const events = await eventsOf(a.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created', 'invoice.sent', 'invoice.overdue', 'invoice.paid']);
    const current = await get(`/v1/invoices/${a.id}`, keys.sandbox);
    expect(events[3].data.object).toMatchObject({ status: 'paid', paid_at: current.body.data.paid_at });

    const b = await createInvoice();
    await post(`/v1/invoices/${b.id}/send`, keys.sandbox);
    await sql(`update invoices set status = 'void' where id = $1`, [b.id]);
    expect((await eventsOf(b.id)).map((e) => e.type)).toEqual(['invoice.created', 'invoice.sent', 'invoice.voided']);
  });

  it('the test helper pay emits invoice.paid once (the trigger is its only writer)', async () => {
    const inv = await createInvoice();
    await post(`/v1/invoices/${inv.id}/send`, keys.sandbox);
    const paid = await post(`/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox);
    expect(paid.status).toBe(200);
    const events = await eventsOf(inv.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created', 'invoice.sent', 'invoice.paid']);
    expect(events[2].data.object).toEqual(paid.body.data);
  });

  it('POST /void emits invoice.voided once (by the trigger); a deleted draft keeps its events readable', async () => {
    const inv = await createInvoice();
    await post(`/v1/invoices/${inv.id}/send`, keys.sandbox);
    const voided = await post(`/v1/invoices/${inv.id}/void`, keys.sandbox);
    expect(voided.status).toBe(200);
    const events = await eventsOf(inv.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created', 'invoice.sent', 'invoice.voided']);
    expect(events[2].data.object).toEqual(voided.body.data);

    const draft = await createInvoice();
    expect((await call('DELETE', `/v1/invoices/${draft.id}`, keys.sandbox)).status).toBe(200);
    const [created] = await eventsOf(draft.id);
    expect(created.data.object).toEqual(draft);
  });

  it('turning reminders off is invoice.updated; setting the same value again is no event', async () => {
    const inv = await createInvoice();
    await post(`/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: false });
    await post(`/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: false });
    const events = await eventsOf(inv.id);
    expect(events.map((e) => e.type)).toEqual(['invoice.created', 'invoice.updated']);
    expect(events[1].data.object.reminders_enabled).toBe(false);
  });

  it('keeps amounts exact in the stored invoice (numeric strings, never floats)', async () => {
    const inv = await createInvoice(keys.sandbox, { amount: '123456789012.123456' });
    const [created] = await eventsOf(inv.id);
    expect(created.data.object).toMatchObject({ amount: '123456789012.123456', amount_atomic: '123456789012123456' });
  });
});

describe('other kinds', () => {
  it('product.created/updated, payment_link.created/updated/deleted, credential.revoked (subscription events: the subscriptions trigger, with its tests)', async () => {
    const product = await post('/v1/products', keys.sandbox, { name: 'Plan', prices: [{ amount: '5', cadence: 'monthly' }] });
    expect(product.status).toBe(200);
    const productUpdated = await patch(`/v1/products/${product.body.data.id}`, keys.sandbox, { name: 'Plan B' });
    const link = await post('/v1/payment-links', keys.sandbox, { name: 'Tips' });
    const linkUpdated = await patch(`/v1/payment-links/${link.body.data.id}`, keys.sandbox, { name: 'More tips' });
    const deleted = await call('DELETE', `/v1/payment-links/${link.body.data.id}`, keys.sandbox);
    expect(deleted.status).toBe(200);
    const key = await post('/v1/credentials', keys.sandbox, { name: 'temp' });
    const revoked = await call('DELETE', `/v1/credentials/${key.body.data.id}`, keys.sandbox);
    await call('DELETE', `/v1/credentials/${key.body.data.id}`, keys.sandbox); // again: no second event

    expect((await eventsOf(product.body.data.id)).map((e) => [e.type, e.data.object])).toEqual([
      ['product.created', product.body.data],
      ['product.updated', productUpdated.body.data],
    ]);
    expect((await eventsOf(link.body.data.id)).map((e) => [e.type, e.data.object])).toEqual([
      ['payment_link.created', link.body.data],
      ['payment_link.updated', linkUpdated.body.data],
      ['payment_link.deleted', linkUpdated.body.data],
    ]);
    const keyEvents = await eventsOf(key.body.data.id);
    expect(keyEvents.map((e) => [e.type, e.data.object])).toEqual([['credential.revoked', revoked.body.data]]);
    expect(keyEvents[0].data.object.secret).toBeUndefined();
  });
});

describe('GET /v1/events', () => {
  it('pages newest first with limit and starting_after, and filters by type', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createInvoice(keys.live, { network: 'base' })).id);
    const first = await get('/v1/events?limit=2&type=invoice.created', keys.live);
    expect(first.status).toBe(200);
    expect(first.body.data.map((e: JsonBody) => e.data.object.id)).toEqual([ids[4], ids[3]]);
    expect((first.body as unknown as JsonBody).has_more).toBe(true);
    const all: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await get(`/v1/events?limit=2&type=invoice.created${after ? `&starting_after=${after}` : ''}`, keys.live);
      const data = page.body.data as unknown as JsonBody[];
      all.push(...data.map((e) => e.data.object.id as string));
      if (!(page.body as unknown as JsonBody).has_more) break;
      after = data[data.length - 1].id;
    }
    expect(all).toEqual([...ids].reverse());
    // ending_before walks back towards newer events.
    const back = await get(`/v1/events?limit=2&type=invoice.created&ending_before=${ids[1]}`, keys.live);
    expect(back.status).toBe(400); // an invoice id is not an event of this list
    const newer = await get(`/v1/events?limit=2&type=invoice.created&ending_before=${(first.body.data as unknown as JsonBody[])[1].id}`, keys.live);
    expect(newer.body.data.map((e: JsonBody) => e.data.object.id)).toEqual([ids[4]]);
    for (const e of first.body.data as unknown as JsonBody[]) expect(e.environment).toBe('live');
  });

  it('retrieves one event; other environments and accounts get 404', async () => {
    const inv = await createInvoice();
    const [created] = await eventsOf(inv.id);
    const one = await get(`/v1/events/${created.id}`, keys.sandbox);
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(created);
    expect((await get(`/v1/events/${created.id}`, keys.sandbox_read_only)).status).toBe(200);
    expectError(await get(`/v1/events/${created.id}`, keys.live), 404, 'invalid_request_error', 'resource_missing');
    expectError(await get(`/v1/events/${created.id}`, other.sandbox), 404, 'invalid_request_error', 'resource_missing');
    // Nothing crosses environments or accounts in the list either.
    expect((await eventsOf(inv.id, keys.live)).length).toBe(0);
    expect((await eventsOf(inv.id, other.sandbox)).length).toBe(0);
  });

  it('refuses a bad limit, an unknown type, a foreign cursor and unknown parameters with 400', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=-1', 'limit=1.5']) {
      expectError(await get(`/v1/events?${q}`, keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    }
    expectError(await get('/v1/events?type=invoice.nope', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    expectError(await get('/v1/events?starting_after=evt_missing', keys.sandbox), 400, 'invalid_request_error', 'invalid_cursor');
    expectError(await get('/v1/events?order=asc', keys.sandbox), 400, 'invalid_request_error', 'validation_failed');
    const ok = await get('/v1/events?limit=100', keys.sandbox);
    expect(ok.status).toBe(200);
  });
});
