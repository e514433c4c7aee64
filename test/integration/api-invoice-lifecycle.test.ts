// The rest of an invoice's life over HTTP: void, delete a draft, list and page (invoices,
// products, credentials), read the lines back; and product delete.
import { describe, expect, it } from 'vitest';
import { expectError, useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';

const { fx, keys, other, get, post, del } = useApiFixture();
const reject = (res: ApiResponse, status: number, code: string) =>
  expectError(res, status, status === 403 ? 'permission_error' : 'invalid_request_error', code, { noData: true });

async function createInvoice(body: Record<string, unknown> = {}, key = keys.sandbox): Promise<JsonBody> {
  const res = await post('/v1/invoices', key, { customer_email: 'payer@example.test', amount: '25', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}
async function sendInvoice(id: string, key = keys.sandbox): Promise<JsonBody> {
  const res = await post(`/v1/invoices/${id}/send`, key);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}
/** Every page of a list, following starting_after. */
async function walk(path: string, key: string, limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let pages = 0;
  let after: string | undefined;
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const res = await get(`${path}${sep}limit=${limit}${after ? `&starting_after=${after}` : ''}`, key);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    pages++;
    ids.push(...res.body.data.map((x: JsonBody) => x.id as string));
    if (!res.body.has_more) return { ids, pages };
    after = ids[ids.length - 1];
  }
}

describe('POST /v1/invoices/{id}/void', () => {
  it('voids an open invoice; it stays readable and keeps its number; reminders closed', async () => {
    const inv = await createInvoice();
    const sent = await sendInvoice(inv.id);
    const res = await post(`/v1/invoices/${inv.id}/void`, keys.sandbox);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ id: inv.id, status: 'void', code: sent.code, amount: '25' });
    expect(Date.parse(res.body.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(sent.updated_at));
    expect((await get(`/v1/invoices/${inv.id}`, keys.sandbox)).body.data.status).toBe('void');
    const { rows } = await fx.api.pool.query('select voided_at from invoices where id = $1', [inv.id]);
    expect(rows[0].voided_at).toBeInstanceOf(Date);
    reject(await post(`/v1/invoices/${inv.id}/void`, keys.sandbox), 400, 'invoice_not_voidable');
    reject(await post(`/v1/invoices/${inv.id}/reminders`, keys.sandbox, { enabled: true }), 400, 'invoice_reminders_closed');
    reject(await post(`/v1/test_helpers/invoices/${inv.id}/pay`, keys.sandbox), 400, 'invoice_not_payable');
  });

  it('voids an overdue invoice', async () => {
    const inv = await createInvoice();
    await sendInvoice(inv.id);
    await fx.api.pool.query(`update invoices set status = 'overdue' where id = $1`, [inv.id]);
    const res = await post(`/v1/invoices/${inv.id}/void`, keys.sandbox);
    expect([res.status, res.body.data?.status]).toEqual([200, 'void']);
  });

  it('refuses a draft and a paid invoice with invoice_not_voidable, unchanged', async () => {
    const draft = await createInvoice();
    reject(await post(`/v1/invoices/${draft.id}/void`, keys.sandbox), 400, 'invoice_not_voidable');
    expect((await get(`/v1/invoices/${draft.id}`, keys.sandbox)).body.data.status).toBe('draft');
    const paid = await createInvoice();
    await sendInvoice(paid.id);
    expect((await post(`/v1/test_helpers/invoices/${paid.id}/pay`, keys.sandbox)).status).toBe(200);
    reject(await post(`/v1/invoices/${paid.id}/void`, keys.sandbox), 400, 'invoice_not_voidable');
    expect((await get(`/v1/invoices/${paid.id}`, keys.sandbox)).body.data.status).toBe('paid');
  });

  it('404 for another account or environment, 403 for a read-only key', async () => {
    const inv = await createInvoice();
    await sendInvoice(inv.id);
    reject(await post(`/v1/invoices/${inv.id}/void`, other.sandbox), 404, 'resource_missing');
    reject(await post(`/v1/invoices/${inv.id}/void`, keys.live), 404, 'resource_missing');
    const ro = await post('/v1/credentials', keys.sandbox, { name: 'ro', permission: 'read_only' });
    reject(await post(`/v1/invoices/${inv.id}/void`, ro.body.data.secret), 403, 'permission_denied');
    expect((await get(`/v1/invoices/${inv.id}`, keys.sandbox)).body.data.status).toBe('open');
  });
});

describe('DELETE /v1/invoices/{id}', () => {
  it('deletes a draft with its lines: 200 {id, deleted: true}, then 404', async () => {
    const inv = await createInvoice({ amount: undefined, line_items: [{ description: 'A', quantity: 2, unit_amount: '3' }] });
    const res = await del(`/v1/invoices/${inv.id}`, keys.sandbox);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ data: { id: inv.id, deleted: true } });
    reject(await get(`/v1/invoices/${inv.id}`, keys.sandbox), 404, 'resource_missing');
    reject(await del(`/v1/invoices/${inv.id}`, keys.sandbox), 404, 'resource_missing');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from invoice_line_items where invoice_id = $1', [inv.id]);
    expect(rows[0].n).toBe(0);
  });

  it('refuses every sent invoice with invoice_not_deletable; numbering stays gap-free', async () => {
    const a = await createInvoice();
    const sentA = await sendInvoice(a.id);
    const doomed = await createInvoice();
    expect((await del(`/v1/invoices/${doomed.id}`, keys.sandbox)).status).toBe(200);
    const b = await createInvoice();
    const sentB = await sendInvoice(b.id);
    const n = (code: string) => Number(code.split('-').pop());
    expect(n(sentB.code)).toBe(n(sentA.code) + 1);

    reject(await del(`/v1/invoices/${a.id}`, keys.sandbox), 400, 'invoice_not_deletable'); // open
    expect((await post(`/v1/invoices/${a.id}/void`, keys.sandbox)).status).toBe(200);
    reject(await del(`/v1/invoices/${a.id}`, keys.sandbox), 400, 'invoice_not_deletable'); // void
    expect((await post(`/v1/test_helpers/invoices/${b.id}/pay`, keys.sandbox)).status).toBe(200);
    reject(await del(`/v1/invoices/${b.id}`, keys.sandbox), 400, 'invoice_not_deletable'); // paid
    expect((await get(`/v1/invoices/${a.id}`, keys.sandbox)).status).toBe(200);
  });

  it('404 for another account, 403 read-only', async () => {
    const inv = await createInvoice();
    reject(await del(`/v1/invoices/${inv.id}`, other.sandbox), 404, 'resource_missing');
    const ro = await post('/v1/credentials', keys.sandbox, { name: 'ro', permission: 'read_only' });
    reject(await del(`/v1/invoices/${inv.id}`, ro.body.data.secret), 403, 'permission_denied');
    expect((await get(`/v1/invoices/${inv.id}`, keys.sandbox)).status).toBe(200);
  });

  it('a delete racing a send: exactly one wins, never a 500', async () => {
    for (let i = 0; i < 5; i++) {
      const inv = await createInvoice();
      const [d, s] = await Promise.all([del(`/v1/invoices/${inv.id}`, keys.sandbox), post(`/v1/invoices/${inv.id}/send`, keys.sandbox)]);
      const outcome = [d.status, s.status].sort().join(',');
      expect(['200,400', '200,404'], `${d.raw} ${s.raw}`).toContain(outcome);
    }
  });
});

describe('GET /v1/invoices/{id}/lines', () => {
  it('returns the lines as written, in order, with their totals', async () => {
    const inv = await createInvoice({
      amount: undefined,
      line_items: [
        { description: 'Design', quantity: 3, unit_amount: '12.50' },
        { description: 'Hosting', quantity: 1, unit_amount: '0.000001' },
      ],
    });
    const res = await get(`/v1/invoices/${inv.id}/lines`, keys.sandbox);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([
      { description: 'Design', quantity: 3, unit_amount: '12.5', amount: '37.5' },
      { description: 'Hosting', quantity: 1, unit_amount: '0.000001', amount: '0.000001' },
    ]);
    expect(inv.amount).toBe('37.500001');
  });

  it('an invoice with a bare amount has no lines; another account gets 404', async () => {
    const inv = await createInvoice();
    expect((await get(`/v1/invoices/${inv.id}/lines`, keys.sandbox)).body).toEqual({ data: [] });
    reject(await get(`/v1/invoices/${inv.id}/lines`, other.sandbox), 404, 'resource_missing');
  });
});

describe('GET /v1/invoices', () => {
  it('pages newest first with limit/starting_after/ending_before and has_more', async () => {
    const merchant = await import('../../src/runtime/provision.js');
    const { newId } = await import('../../src/domain/ids.js');
    const m = await merchant.provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Pager', email: null });
    const created: string[] = [];
    for (let i = 0; i < 12; i++) created.push((await createInvoice({ amount: String(i + 1) }, m.keys.sandbox)).id);
    const newestFirst = [...created].reverse();

    const first = await get('/v1/invoices', m.keys.sandbox);
    expect(first.status).toBe(200);
    expect(Object.keys(first.body).sort()).toEqual(['data', 'has_more']);
    expect(first.body.data.map((x: JsonBody) => x.id)).toEqual(newestFirst.slice(0, 10)); // default 10
    expect(first.body.has_more).toBe(true);

    const second = await get(`/v1/invoices?limit=10&starting_after=${newestFirst[9]}`, m.keys.sandbox);
    expect(second.body.data.map((x: JsonBody) => x.id)).toEqual(newestFirst.slice(10));
    expect(second.body.has_more).toBe(false);

    // ending_before: the page right before the cursor, still newest first.
    const back = await get(`/v1/invoices?limit=3&ending_before=${newestFirst[8]}`, m.keys.sandbox);
    expect(back.body.data.map((x: JsonBody) => x.id)).toEqual(newestFirst.slice(5, 8));
    expect(back.body.has_more).toBe(true);
    const top = await get(`/v1/invoices?limit=3&ending_before=${newestFirst[2]}`, m.keys.sandbox);
    expect(top.body.data.map((x: JsonBody) => x.id)).toEqual(newestFirst.slice(0, 2));
    expect(top.body.has_more).toBe(false);

    const one = await get('/v1/invoices?limit=1', m.keys.sandbox);
    expect(one.body.data).toHaveLength(1);
    const all = await get('/v1/invoices?limit=100', m.keys.sandbox);
    expect([all.body.data.length, all.body.has_more]).toEqual([12, false]);
    // The other environment and other accounts see none of them.
    expect((await get('/v1/invoices?limit=100', m.keys.live)).body.data).toEqual([]);
  });

  it('filters by status and customer_email (case-insensitive), combined with paging', async () => {
    const email = `Filter.${Date.now()}@Example.test`;
    const a = await createInvoice({ customer_email: email });
    const b = await createInvoice({ customer_email: email });
    await sendInvoice(b.id);
    await createInvoice({ customer_email: 'someone-else@example.test' });

    const byEmail = await get(`/v1/invoices?customer_email=${encodeURIComponent(email.toLowerCase())}`, keys.sandbox);
    expect(byEmail.body.data.map((x: JsonBody) => x.id)).toEqual([b.id, a.id]);
    const openOnes = await get(`/v1/invoices?status=open&customer_email=${encodeURIComponent(email)}`, keys.sandbox);
    expect(openOnes.body.data.map((x: JsonBody) => x.id)).toEqual([b.id]);
    const paged = await get(`/v1/invoices?customer_email=${encodeURIComponent(email)}&limit=1&starting_after=${b.id}`, keys.sandbox);
    expect([paged.body.data.map((x: JsonBody) => x.id), paged.body.has_more]).toEqual([[a.id], false]);
    const drafts = await get('/v1/invoices?status=draft&limit=100', keys.sandbox);
    expect(drafts.body.data.every((x: JsonBody) => x.status === 'draft')).toBe(true);
    expect((await get('/v1/invoices?customer_email=nobody@example.test', keys.sandbox)).body).toEqual({ data: [], has_more: false });
  });

  it('refuses bad paging input with a 400 naming it', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'status=late', 'colour=red']) {
      const res = await get(`/v1/invoices?${q}`, keys.sandbox);
      reject(res, 400, 'validation_failed');
    }
    const inv = await createInvoice();
    reject(await get(`/v1/invoices?starting_after=${inv.id}&ending_before=${inv.id}`, keys.sandbox), 400, 'validation_failed');
    const missing = await get('/v1/invoices?starting_after=inv_doesnotexist', keys.sandbox);
    reject(missing, 400, 'invalid_cursor');
    expect(missing.body.error.message).toContain('starting_after');
    // A cursor of another account is not a cursor here.
    const theirs = await createInvoice({}, other.sandbox);
    reject(await get(`/v1/invoices?ending_before=${theirs.id}`, keys.sandbox), 400, 'invalid_cursor');
  });

  it('paging 25 invoices by 10 while 10 more are inserted sees each original exactly once', async () => {
    const { provisionMerchant } = await import('../../src/runtime/provision.js');
    const { newId } = await import('../../src/domain/ids.js');
    const m = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Busy', email: null });
    const originals = new Set<string>();
    for (let i = 0; i < 25; i++) originals.add((await createInvoice({ amount: '1' }, m.keys.sandbox)).id);

    // Page 1; then each next page is read while 5 new invoices are being created (10 in all).
    const seen: string[] = [];
    let res = await get('/v1/invoices?limit=10', m.keys.sandbox);
    let inserted = 0;
    for (;;) {
      expect(res.status).toBe(200);
      seen.push(...res.body.data.map((x: JsonBody) => x.id as string));
      if (!res.body.has_more) break;
      const next = get(`/v1/invoices?limit=10&starting_after=${seen[seen.length - 1]}`, m.keys.sandbox);
      const creates = inserted < 10 ? Array.from({ length: 5 }, () => createInvoice({ amount: '2' }, m.keys.sandbox)) : [];
      inserted += creates.length;
      [res] = await Promise.all([next, ...creates]);
    }
    expect(inserted).toBe(10);
    expect((await get('/v1/invoices?limit=100', m.keys.sandbox)).body.data).toHaveLength(35);
    const originalsSeen = seen.filter((id) => originals.has(id));
    expect(originalsSeen).toHaveLength(25);
    expect(new Set(originalsSeen).size).toBe(25);
    expect(new Set(seen).size).toBe(seen.length); // nothing twice at all
  });
});

describe('GET /v1/products and DELETE /v1/products/{id}', () => {
  async function product(name: string, key = keys.sandbox): Promise<JsonBody> {
    const res = await post('/v1/products', key, { name, prices: [{ amount: '10', cadence: 'monthly' }] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  }

  it('lists products with their prices, newest first, paged', async () => {
    const made = [await product('P1'), await product('P2'), await product('P3')];
    const page = await get('/v1/products?limit=2', keys.sandbox);
    expect(page.status).toBe(200);
    expect(page.body.data.map((p: JsonBody) => p.id)).toEqual([made[2].id, made[1].id]);
    expect(page.body.has_more).toBe(true);
    expect(page.body.data[0]).toEqual(made[2]);
    const { ids } = await walk('/v1/products', keys.sandbox, 2);
    expect(ids.slice(0, 3)).toEqual([made[2].id, made[1].id, made[0].id]);
    expect((await get('/v1/products', other.sandbox)).body.data.map((p: JsonBody) => p.id)).not.toContain(made[0].id);
  });

  it('deletes a deletable product with its prices; 409 product_not_deletable once a price is used', async () => {
    const free = await product('Free');
    expect(free.deletable).toBe(true);
    const res = await del(`/v1/products/${free.id}`, keys.sandbox);
    expect(res.body).toEqual({ data: { id: free.id, deleted: true } });
    reject(await get(`/v1/products/${free.id}`, keys.sandbox), 404, 'resource_missing');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from prices where product_id = $1', [free.id]);
    expect(rows[0].n).toBe(0);

    const used = await product('Used');
    const link = await post('/v1/payment-links', keys.sandbox, { name: 'L', price_id: used.prices[0].id });
    expect(link.status).toBe(200);
    reject(await del(`/v1/products/${used.id}`, keys.sandbox), 409, 'product_not_deletable');
    expect((await get(`/v1/products/${used.id}`, keys.sandbox)).body.data.deletable).toBe(false);

    reject(await del(`/v1/products/${used.id}`, other.sandbox), 404, 'resource_missing');
    const ro = await post('/v1/credentials', keys.sandbox, { name: 'ro', permission: 'read_only' });
    reject(await del(`/v1/products/${(await product('X')).id}`, ro.body.data.secret), 403, 'permission_denied');
  });

  it('a delete racing a payment link on its price: never a 500, never a link on a deleted price', async () => {
    for (let i = 0; i < 5; i++) {
      const p = await product(`Race ${i}`);
      const [d, l] = await Promise.all([del(`/v1/products/${p.id}`, keys.sandbox), post('/v1/payment-links', keys.sandbox, { name: 'L', price_id: p.prices[0].id })]);
      const outcome = `${d.status},${l.status}`;
      expect(['200,400', '409,200'], `${d.raw} ${l.raw}`).toContain(outcome);
    }
  });
});

describe('GET /v1/credentials', () => {
  it('lists the keys of the environment, newest first, never a secret', async () => {
    const made: JsonBody[] = [];
    for (const name of ['k1', 'k2', 'k3']) made.push((await post('/v1/credentials', keys.sandbox, { name })).body.data);
    const page = await get('/v1/credentials?limit=2', keys.sandbox);
    expect(page.status).toBe(200);
    expect(page.body.data.map((c: JsonBody) => c.id)).toEqual([made[2].id, made[1].id]);
    expect(page.body.has_more).toBe(true);
    const { ids } = await walk('/v1/credentials', keys.sandbox, 2);
    expect(ids.slice(0, 3)).toEqual([made[2].id, made[1].id, made[0].id]);
    const all = await get('/v1/credentials?limit=100', keys.sandbox);
    for (const c of all.body.data as JsonBody[]) {
      expect(c).not.toHaveProperty('secret');
      expect(c.environment).toBe('sandbox');
    }
    expect(all.raw).not.toContain(made[0].secret);
    // Revoked keys are listed as revoked.
    await del(`/v1/credentials/${made[0].id}`, keys.sandbox);
    const after = await get('/v1/credentials?limit=100', keys.sandbox);
    expect(after.body.data.find((c: JsonBody) => c.id === made[0].id)).toMatchObject({ revoked: true });
    expect((await get('/v1/credentials?limit=100', keys.live)).body.data.every((c: JsonBody) => c.environment === 'live')).toBe(true);
  });
});

