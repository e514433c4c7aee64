// The hosted payment page over HTTP (Fastify inject against real Postgres): what an invoice and a
// payment link page show, the strict CSP, sandbox-only "Simulate payment" through the same path
// as the test helpers, and the QR codes / EIP-681 URI. The browser flow is in
// payment-page-browser.test.ts.
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { useApiFixture } from '../helpers/http.js';

const SETTLEMENT = '0x1111111111111111111111111111111111111111';
const USDC_BASE_SEPOLIA = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const ctx = useApiFixture({ otherMerchant: false });

async function page(path: string, headers: Record<string, string> = {}) {
  const res = await ctx.fx.api.app.inject({ method: 'GET', url: path, headers });
  return { status: res.statusCode, html: res.body, headers: res.headers };
}

async function simulate(path: string, form: Record<string, string> = {}) {
  return ctx.fx.api.app.inject({
    method: 'POST',
    url: `${path}/simulate`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });
}

async function sentInvoice(key: string, body: Record<string, unknown> = {}) {
  const created = await ctx.post('/v1/invoices', key, { customer_email: 'payer@example.test', amount: '1234.5', due_at: '2030-01-15T12:00:00Z', ...body });
  expect(created.status, created.raw).toBe(200);
  const sent = await ctx.post(`/v1/invoices/${created.body.data.id}/send`, key);
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

/** The visible text of a page, tags dropped, entities of interest decoded. */
const text = (html: string) =>
  html.replace(/<style>[\s\S]*?<\/style>/, '').replace(/<svg[\s\S]*?<\/svg>/g, '').replace(/<[^>]+>/g, ' ').replace(/&#x27;/g, "'").replace(/&amp;/g, '&').replace(/\s+/g, ' ');

describe('invoice page', () => {
  it('shows merchant, code, amount, token, network and chain, due date, status, contract; strict CSP; no script, no external asset', async () => {
    const inv = await sentInvoice(ctx.keys.sandbox);
    const res = await page(`/pay/${inv.reference}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toMatch(/style-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(res.headers['cache-control']).toBe('no-store');
    const t = text(res.html);
    for (const expected of ['Acme Widgets Ltd', inv.code, '1,234.50 USDC', 'base-sepolia', '84532', '15 Jan 2030', 'Awaiting payment', USDC_BASE_SEPOLIA]) {
      expect(t).toContain(expected);
    }
    expect(t).toContain('TEST MODE: this is a test on the base-sepolia test network. No real funds move.');
    expect(res.html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect(res.html).not.toMatch(/src=/);
    // The QR code of the page's own URL, inline.
    expect(res.html).toMatch(/<div class="qr" id="page-qr"><svg/);
    expect(t).toContain(`https://pay.example.test/${inv.reference}`);
    // Sandbox: the simulate form, a plain POST.
    expect(res.html).toContain(`<form method="post" action="/pay/${inv.reference}/simulate">`);
    // No settlement address on this account: no wallet request, and it says why.
    expect(res.html).not.toContain('ethereum:');
    expect(t).toContain('No settlement address was set when this invoice was sent');
  });

  it('with a settlement address: an EIP-681 URI for the exact atomic amount', async () => {
    await ctx.fx.api.pool.query("insert into settlement_addresses (account_id, environment, address) values ($1, 'sandbox', $2) on conflict (account_id, environment) do update set address = excluded.address", [ctx.fx.merchant.accountId, SETTLEMENT]);
    try {
      const inv = await sentInvoice(ctx.keys.sandbox, { amount: '0.000001' });
      const { html } = await page(`/pay/${inv.reference}`);
      const uri = `ethereum:${USDC_BASE_SEPOLIA}@84532/transfer?address=${SETTLEMENT}&uint256=1`;
      const hrefs = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1].replace(/&#x3D;/g, '=').replace(/&amp;/g, '&'));
      expect(hrefs).toContain(uri);
      expect(text(html)).toContain('Send exactly 0.000001 USDC (1 in the token\'s smallest unit) on base-sepolia (chain id 84532).');
      expect(html).toMatch(/<div class="qr" id="wallet-qr"><svg/);
    } finally {
      await ctx.fx.api.pool.query('delete from settlement_addresses where account_id = $1', [ctx.fx.merchant.accountId]);
    }
  });

  it('"Simulate payment" pays through the test-helper path, redirects back, and the page shows paid with its date', async () => {
    const inv = await sentInvoice(ctx.keys.sandbox);
    const res = await simulate(`/pay/${inv.reference}`);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/pay/${inv.reference}`);
    const got = await ctx.get(`/v1/invoices/${inv.id}`, ctx.keys.sandbox);
    expect(got.body.data.status).toBe('paid');
    const { html } = await page(`/pay/${inv.reference}`);
    const paidDate = new Intl.DateTimeFormat('en-US', { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'Europe/Paris' })
      .formatToParts(new Date(got.body.data.paid_at))
      .reduce<Record<string, string>>((a, p) => ({ ...a, [p.type]: p.value }), {});
    expect(text(html)).toContain(`Paid on ${paidDate.day} ${paidDate.month} ${paidDate.year}. Thank you!`);
    expect(html).not.toContain('/simulate');
    // A second click: still paid, no error.
    expect((await simulate(`/pay/${inv.reference}`)).statusCode).toBe(303);
  });

  it('a void invoice shows void; a draft has no page; unknown and malformed ids are 404 pages', async () => {
    const inv = await sentInvoice(ctx.keys.sandbox);
    await ctx.fx.api.pool.query(`update invoices set status = 'void' where id = $1`, [inv.id]);
    const voided = await page(`/pay/${inv.reference}`);
    expect(text(voided.html)).toContain('This invoice was voided and can no longer be paid.');
    expect(voided.html).not.toContain('/simulate');
    const refused = await simulate(`/pay/${inv.reference}`);
    expect(refused.statusCode).toBe(400);
    expect(await ctx.fx.api.pool.query('select status from invoices where id = $1', [inv.id]).then((r) => r.rows[0].status)).toBe('void');

    const draft = await ctx.post('/v1/invoices', ctx.keys.sandbox, { customer_email: 'd@example.test', amount: '1' });
    expect((await page(`/pay/${draft.body.data.reference}`)).status).toBe(404);
    expect((await simulate(`/pay/${draft.body.data.reference}`)).statusCode).toBe(404);
    for (const bad of ['/pay/nope', '/pay/..%2F..%2Fetc', `/pay/${'x'.repeat(300)}`, '/pay/plink_missing']) {
      const res = await page(bad);
      expect(res.status, bad).toBe(404);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    }
  });

  it('live: no simulate button, and a simulate POST changes nothing', async () => {
    const inv = await sentInvoice(ctx.keys.live);
    const { html } = await page(`/pay/${inv.reference}`);
    expect(html).not.toContain('Simulate payment');
    expect(html).not.toContain('TEST MODE');
    expect((await simulate(`/pay/${inv.reference}`)).statusCode).toBe(404);
    expect((await ctx.get(`/v1/invoices/${inv.id}`, ctx.keys.live)).body.data.status).toBe('open');
  });

  it('in the customer locale', async () => {
    const inv = await sentInvoice(ctx.keys.sandbox, { customer_locale: 'de', customer_email: 'de@example.test' });
    const t = text((await page(`/pay/${inv.reference}`)).html);
    expect(t).toContain('1.234,50 USDC');
    expect(t).toContain('Zahlung ausstehend');
    expect(t).toContain('15. Jan. 2030');
    expect(t).toContain('Zahlung simulieren');
  });
});

describe('payment link page', () => {
  it('a fixed-price link shows its price; simulate records a payment on it', async () => {
    const product = await ctx.post('/v1/products', ctx.keys.sandbox, { name: 'Pro', prices: [{ amount: '49.00', cadence: 'one_time' }] });
    const link = await ctx.post('/v1/payment-links', ctx.keys.sandbox, { name: 'Pro plan', price_id: product.body.data.prices[0].id, collect_email: true });
    expect(link.body.data.url).toBe(`https://pay.example.test/${link.body.data.id}`);
    const res = await page(`/pay/${link.body.data.id}`);
    expect(res.status).toBe(200);
    const t = text(res.html);
    expect(t).toContain('Pro plan');
    expect(t).toContain('Price 49.00 USDC');
    expect(res.html).toContain('name="customer_email"');
    const done = await simulate(`/pay/${link.body.data.id}`, { customer_email: 'buyer@example.test' });
    expect(done.statusCode).toBe(303);
    const after = await page(String(done.headers.location));
    expect(text(after.html)).toContain('Payment recorded: 49.00 USDC.');
    const { rows } = await ctx.fx.api.pool.query('select customer_email, amount::text from payment_link_payments where payment_link_id = $1', [link.body.data.id]);
    expect(rows).toEqual([{ customer_email: 'buyer@example.test', amount: '49' }]);
  });

  it('a custom-amount link shows its range; an amount outside it is refused on the page', async () => {
    const link = await ctx.post('/v1/payment-links', ctx.keys.sandbox, { name: 'Tip jar', min_amount: '1', max_amount: '500', preset_amount: '5' });
    const res = await page(`/pay/${link.body.data.id}`, { 'accept-language': 'fr-CH, en;q=0.5' });
    const t = text(res.html);
    expect(t).toMatch(/Choisissez un montant entre 1,00 et 500,00 USDC\./);
    expect(res.html).toContain('name="amount"');
    const refused = await simulate(`/pay/${link.body.data.id}`, { amount: '501' });
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('amount must be between 1 and 500 USDC');
    const ok = await simulate(`/pay/${link.body.data.id}`, { amount: '7.5' });
    expect(ok.statusCode).toBe(303);
    expect(text((await page(String(ok.headers.location))).html)).toContain('Payment recorded: 7.50 USDC.');
  });

  it('an inactive link says so and offers no payment', async () => {
    const link = await ctx.post('/v1/payment-links', ctx.keys.sandbox, { name: 'Old', min_amount: '1' });
    await ctx.patch(`/v1/payment-links/${link.body.data.id}`, ctx.keys.sandbox, { status: 'inactive' });
    const { html } = await page(`/pay/${link.body.data.id}`);
    expect(text(html)).toContain('This payment link is no longer active.');
    expect(html).not.toContain('/simulate');
    expect((await simulate(`/pay/${link.body.data.id}`, { amount: '2' })).statusCode).toBe(400);
  });

  it('serves pages for other merchants too (the id is the access), each its own', async () => {
    const other = await provisionMerchant(ctx.fx.api.pool, { id: newId('acct'), name: 'Zeta Shop', email: null });
    const inv = await sentInvoice(other.keys.sandbox);
    expect(text((await page(`/pay/${inv.reference}`)).html)).toContain('Zeta Shop');
  });
});
