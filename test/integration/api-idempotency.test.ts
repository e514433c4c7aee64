// Idempotency-Key on POST: replays, reuse with another request, concurrent retries, limits,
// which responses are kept, expiry and pruning.
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { pruneIdempotencyKeys } from '../../src/db/idempotency-keys.js';
import { IDEMPOTENCY_KEY_TTL_MS } from '../../src/domain/idempotency.js';
import { expectError, request, useApiFixture, type ApiResponse, type JsonBody } from '../helpers/http.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

const { fx, keys, other, get } = useApiFixture();

let n = 0;
const newKey = () => `test-key-${Date.now()}-${++n}`;
async function postWithKey(url: string, body: unknown, idemKey: string | null, apiKey = keys.sandbox): Promise<ApiResponse & { replayed?: string }> {
  const res = await fx.api.app.inject({
    method: 'POST',
    url,
    headers: { 'api-key': apiKey, ...(idemKey === null ? {} : { 'idempotency-key': idemKey }) },
    ...(body === undefined ? {} : { payload: body as object }),
  });
  return { status: res.statusCode, body: res.json(), raw: res.body, replayed: res.headers['idempotent-replayed'] as string | undefined };
}
async function countInvoices(email: string): Promise<number> {
  const { rows } = await fx.api.pool.query<{ n: number }>(
    'select count(*)::int as n from invoices i join customers c on c.id = i.customer_id where c.email = $1',
    [email],
  );
  return rows[0].n;
}

describe('Idempotency-Key', () => {
  it('a retry with the same key and body gets the stored response, replayed, and creates nothing', async () => {
    const key = newKey();
    const body = { customer_email: 'idem-1@example.test', amount: '10', metadata: { a: '1', b: '2' } };
    const first = await postWithKey('/v1/invoices', body, key);
    expect(first.status).toBe(200);
    expect(first.replayed).toBeUndefined();
    // Same request, keys in another order.
    const again = await postWithKey('/v1/invoices', { metadata: { b: '2', a: '1' }, amount: '10', customer_email: 'idem-1@example.test' }, key);
    expect(again.status).toBe(200);
    expect(again.replayed).toBe('true');
    expect(again.raw).toBe(first.raw);
    expect(await countInvoices('idem-1@example.test')).toBe(1);
    // Without a key, the same body makes a second invoice.
    expect((await postWithKey('/v1/invoices', body, null)).status).toBe(200);
    expect(await countInvoices('idem-1@example.test')).toBe(2);
  });

  it('20 concurrent POSTs with one key make one invoice; the others are replays or 409 in use', async () => {
    const key = newKey();
    const body = { customer_email: 'idem-20@example.test', amount: '20' };
    const results = await Promise.all(Array.from({ length: 20 }, () => postWithKey('/v1/invoices', body, key)));
    expect(await countInvoices('idem-20@example.test')).toBe(1);
    const ok = results.filter((r) => r.status === 200);
    const busy = results.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(20);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(new Set(ok.map((r) => r.body.data.id)).size).toBe(1);
    expect(ok.filter((r) => r.replayed === undefined)).toHaveLength(1);
    for (const r of busy) expectError(r, 409, 'invalid_request_error', 'idempotency_key_in_use');
    // Once done, every retry is a replay of that one invoice.
    const later = await postWithKey('/v1/invoices', body, key);
    expect([later.status, later.replayed, later.body.data.id]).toEqual([200, 'true', ok[0].body.data.id]);
  });

  it('the same key with a different body or path is 400 idempotency_key_reused; nothing runs', async () => {
    const key = newKey();
    expect((await postWithKey('/v1/invoices', { customer_email: 'idem-r@example.test', amount: '5' }, key)).status).toBe(200);
    const changed = await postWithKey('/v1/invoices', { customer_email: 'idem-r@example.test', amount: '6' }, key);
    expectError(changed, 400, 'invalid_request_error', 'idempotency_key_reused');
    const otherPath = await postWithKey('/v1/products', { name: 'P' }, key);
    expectError(otherPath, 400, 'invalid_request_error', 'idempotency_key_reused');
    expect(await countInvoices('idem-r@example.test')).toBe(1);
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from products where name = 'P'`);
    expect(rows[0].n).toBe(0);
  });

  it('keys belong to the account and environment: the same key elsewhere is a new request', async () => {
    const key = newKey();
    const body = { customer_email: 'idem-scope@example.test', amount: '7' };
    const mine = await postWithKey('/v1/invoices', body, key);
    const live = await postWithKey('/v1/invoices', body, key, keys.live);
    const theirs = await postWithKey('/v1/invoices', body, key, other.sandbox);
    for (const r of [mine, live, theirs]) expect([r.status, r.replayed]).toEqual([200, undefined]);
    expect(new Set([mine.body.data.id, live.body.data.id, theirs.body.data.id]).size).toBe(3);
  });

  it('4xx responses are kept and replayed; a 4xx of the schema too', async () => {
    const inv = (await postWithKey('/v1/invoices', { customer_email: 'idem-4xx@example.test', amount: '3' }, null)).body.data;
    expect((await postWithKey(`/v1/invoices/${inv.id}/send`, undefined, null)).status).toBe(200);
    const key = newKey();
    const first = await postWithKey(`/v1/invoices/${inv.id}/send`, undefined, key);
    expectError(first, 400, 'invalid_request_error', 'invoice_already_sent');
    const again = await postWithKey(`/v1/invoices/${inv.id}/send`, undefined, key);
    expect([again.status, again.replayed, again.raw]).toEqual([400, 'true', first.raw]);

    const badKey = newKey();
    const bad = await postWithKey('/v1/invoices', { customer_email: 'not-an-email' }, badKey);
    expectError(bad, 400, 'invalid_request_error', 'validation_failed');
    expect((await postWithKey('/v1/invoices', { customer_email: 'not-an-email' }, badKey)).replayed).toBe('true');
  });

  it('a send retried with its key sends once: the replay does not enqueue another email', async () => {
    const inv = (await postWithKey('/v1/invoices', { customer_email: 'idem-send@example.test', amount: '3' }, null)).body.data;
    const key = newKey();
    const a = await postWithKey(`/v1/invoices/${inv.id}/send`, undefined, key);
    const b = await postWithKey(`/v1/invoices/${inv.id}/send`, undefined, key);
    expect([a.status, b.status, b.replayed]).toEqual([200, 200, 'true']);
    const { rows } = await fx.api.pool.query(`select count(*)::int as n from deliveries where invoice_id = $1`, [inv.id]);
    expect(rows[0].n).toBe(1);
  });

  it('never keeps a secret: a replayed key creation answers the same credential without its secret', async () => {
    const key = newKey();
    const first = await postWithKey('/v1/credentials', { name: 'ci key' }, key);
    expect(first.status).toBe(200);
    expect(first.body.data.secret).toMatch(/^sp_sandbox_/);
    const { rows } = await fx.api.pool.query('select response_body from idempotency_keys where key = $1', [key]);
    expect(rows[0].response_body).not.toContain(first.body.data.secret);
    const again = await postWithKey('/v1/credentials', { name: 'ci key' }, key);
    expect([again.status, again.replayed]).toEqual([200, 'true']);
    const { secret, ...rest } = first.body.data;
    expect(secret).toBeDefined();
    expect(again.body.data).toEqual(rest);
    const { rows: creds } = await fx.api.pool.query(`select count(*)::int as n from credentials where name = 'ci key'`);
    expect(creds[0].n).toBe(1);
  });

  it('refuses a key over 255 characters with a 400 naming the header; 255 is fine', async () => {
    const body = { customer_email: 'idem-long@example.test', amount: '1' };
    const long = await postWithKey('/v1/invoices', body, 'k'.repeat(256));
    expectError(long, 400, 'invalid_request_error', 'validation_failed');
    expect(long.body.error.message).toContain('Idempotency-Key');
    expect(await countInvoices('idem-long@example.test')).toBe(0);
    expect((await postWithKey('/v1/invoices', body, 'k'.repeat(255))).status).toBe(200);
  });

  it('is ignored on other methods; GET and PATCH behave as without it', async () => {
    const inv = (await postWithKey('/v1/invoices', { customer_email: 'idem-get@example.test', amount: '3' }, null)).body.data;
    const key = newKey();
    for (let i = 0; i < 2; i++) {
      const res = await request(fx.api.app, 'PATCH', `/v1/invoices/${inv.id}`, { headers: { 'api-key': keys.sandbox, 'idempotency-key': key }, body: { memo: `m${i}` } });
      expect(res.status).toBe(200);
    }
    expect((await get(`/v1/invoices/${inv.id}`, keys.sandbox)).status).toBe(200);
    const { rows } = await fx.api.pool.query('select count(*)::int as n from idempotency_keys where key = $1', [key]);
    expect(rows[0].n).toBe(0);
  });

  it('an expired key (older than 24 h) is a new request; pruning deletes expired keys only', async () => {
    const key = newKey();
    const body = { customer_email: 'idem-exp@example.test', amount: '4' };
    const first = await postWithKey('/v1/invoices', body, key);
    await fx.api.pool.query(`update idempotency_keys set created_at = now() - interval '25 hours' where key = $1`, [key]);
    const second = await postWithKey('/v1/invoices', body, key);
    expect([second.status, second.replayed]).toEqual([200, undefined]);
    expect(second.body.data.id).not.toBe(first.body.data.id);

    const fresh = newKey();
    await postWithKey('/v1/invoices', body, fresh);
    await fx.api.pool.query(`update idempotency_keys set created_at = now() - interval '25 hours' where key = $1`, [key]);
    const pruned = await pruneIdempotencyKeys(fx.api.pool, IDEMPOTENCY_KEY_TTL_MS, 1);
    expect(pruned).toBeGreaterThanOrEqual(1);
    const { rows } = await fx.api.pool.query('select key from idempotency_keys where key = any($1)', [[key, fresh]]);
    expect(rows.map((r) => r.key)).toEqual([fresh]);
  });

  it('a first request that died mid-way keeps its key in use until its lease runs out, then a retry runs', async () => {
    const key = newKey();
    const body = { customer_email: 'idem-dead@example.test', amount: '4' };
    // As a process that died after claiming would leave it: in flight, lease run out.
    const first = await postWithKey('/v1/invoices', body, key);
    await fx.api.pool.query(
      `update idempotency_keys set response_status = null, response_body = null, locked_until = now() - interval '1 second' where key = $1`,
      [key],
    );
    const retry = await postWithKey('/v1/invoices', body, key);
    expect([retry.status, retry.replayed]).toEqual([200, undefined]);
    expect(retry.body.data.id).not.toBe(first.body.data.id);
    // While the lease holds, it is in use.
    await fx.api.pool.query(`update idempotency_keys set response_status = null, locked_until = now() + interval '1 minute' where key = $1`, [key]);
    expectError(await postWithKey('/v1/invoices', body, key), 409, 'invalid_request_error', 'idempotency_key_in_use');
  });

  it('permission first: a read-only key is refused, neither replayed a full key\'s response nor storing its own 403', async () => {
    const key = newKey();
    const body = { url: 'https://93.184.215.14/idem-ro', enabled_events: ['*'] };
    const first = await postWithKey('/v1/webhook_endpoints', body, key);
    expect(first.status).toBe(200);
    const replayRo = await postWithKey('/v1/webhook_endpoints', body, key, keys.sandbox_read_only);
    expectError(replayRo, 403, 'permission_error', 'permission_denied');
    expect(replayRo.replayed).toBeUndefined();
    expect(replayRo.raw).not.toContain(first.body.data.id);
    // A read-only key's refused POST stores nothing: the full key's first use of a fresh key runs.
    const fresh = newKey();
    const invoice = { customer_email: 'idem-ro@example.test', amount: '3' };
    expectError(await postWithKey('/v1/invoices', invoice, fresh, keys.sandbox_read_only), 403, 'permission_error', 'permission_denied');
    const full = await postWithKey('/v1/invoices', invoice, fresh);
    expect([full.status, full.replayed]).toEqual([200, undefined]);
  });

  it('two Idempotency-Key headers (which Node joins into "a1, a2") are refused, naming the header; one key with ", " in it is fine', async () => {
    await fx.api.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = fx.api.app.server.address() as AddressInfo;
    const send = (idempotencyKeys: string[], email: string) =>
      new Promise<{ status: number; body: JsonBody }>((resolve, reject) => {
        const payload = JSON.stringify({ customer_email: email, amount: '2' });
        const req = httpRequest(
          {
            host: '127.0.0.1', port, method: 'POST', path: '/v1/invoices',
            // An array is sent as one header line per value, as a client repeating the header would.
            headers: { 'api-key': keys.sandbox, 'content-type': 'application/json', 'idempotency-key': idempotencyKeys },
          },
          (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as JsonBody }));
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    const twice = await send(['a1', 'a2'], 'idem-two@example.test');
    expect(twice.status).toBe(400);
    expect(twice.body.error).toMatchObject({ code: 'validation_failed', message: 'Send one Idempotency-Key header, not several.' });
    expect(await countInvoices('idem-two@example.test')).toBe(0);
    const one = await send([`${newKey()}, a2`], 'idem-comma@example.test');
    expect(one.status).toBe(200);
  });

  it('a worker puts the prune job on its scheduler, which deletes expired keys', async () => {
    const key = newKey();
    await postWithKey('/v1/invoices', { customer_email: 'idem-prune@example.test', amount: '4' }, key);
    await fx.api.pool.query(`update idempotency_keys set created_at = now() - interval '25 hours' where key = $1`, [key]);
    const worker = await startWorker(fx.env.config());
    try {
      expect(await worker.queues.reminders.shard(0).getJobScheduler('idempotency-prune')).toMatchObject({ name: 'idempotency.prune', every: 3_600_000 });
      // An `every` scheduler runs its first job at once.
      await waitUntil(async () => (await fx.api.pool.query('select 1 from idempotency_keys where key = $1', [key])).rowCount === 0, 15_000, 50);
    } finally {
      await worker.close();
    }
  });
});
