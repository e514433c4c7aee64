// A payment link paid with a wallet, in real Chromium against a real chain (anvil with the fee
// proxy and the 6-decimal test USDC, the API and a worker watching it), as the invoice page's
// wallet test: the link page makes a checkout (an invoice of the link) and the script pays it.
// Plus the checkout's refusals and what counts as a payment of the link. States are waited for.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import { chromiumPath, launchChromium, NO_CHROMIUM } from '../helpers/browser.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { installTestWallet } from '../helpers/test-wallet.js';
import { MULTI_STATE_TEST_TIMEOUT_MS, waitUntil } from '../helpers/worker.js';

const CHROMIUM = chromiumPath();
const MERCHANT = '0x4444444444444444444444444444444444444444';
const STATE_TIMEOUT_MS = 30_000;

describe('Payment links paid with a wallet (checkouts)', { timeout: MULTI_STATE_TEST_TIMEOUT_MS }, () => {
  let chain: TestChain;
  let fx: ApiFixture;
  let sink: SmtpSink;
  let origin: string;
  const api = apiClient(() => fx.api.app);
  const key = () => fx.merchant.keys.sandbox;

  let fixture: ChainFixture | undefined;
  beforeAll(async () => {
    fixture = await startChainFixture({ settlementAddress: MERCHANT, listen: true });
    ({ chain, fx, sink } = fixture);
    origin = fixture.origin!;
  }, 120_000);
  afterAll(async () => {
    await fixture?.close();
  });

  async function customLink(extra: Record<string, unknown> = {}): Promise<JsonBody> {
    const res = await api.post('/v1/payment-links', key(), {
      name: 'Donation',
      type: 'custom_amount',
      currency: 'USDC',
      network: 'local',
      min_amount: '1',
      max_amount: '50',
      ...extra,
    });
    expect(res.status, res.raw).toBe(200);
    return res.body.data;
  }
  const linkOf = async (id: string): Promise<JsonBody> => (await api.get(`/v1/payment-links/${id}`, key())).body.data;

  /** POST /pay/<link>/checkout as the page's script does (same origin). */
  async function checkout(linkId: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ status: number; body: JsonBody }> {
    const res = await fetch(`${origin}/pay/${linkId}/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', origin, 'sec-fetch-site': 'same-origin', ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as JsonBody };
  }

  /** Pays a checkout's instructions through the fee proxy from the harness, and mines it to confirmed. */
  async function payCheckout(instructions: JsonBody): Promise<void> {
    await chain.payWithReference({
      to: instructions.to,
      amountAtomic: BigInt(instructions.amount_atomic),
      feeAtomic: BigInt(instructions.fee_atomic),
      reference: instructions.payment_reference,
      feeAddress: instructions.fee_address,
    });
    await chain.mine(2);
  }

  describe.skipIf(!CHROMIUM)(`in Chromium${CHROMIUM ? '' : ` (${NO_CHROMIUM})`}`, () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium(CHROMIUM!);
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('a chosen amount paid with the wallet: checkout, paid on-chain, the page says paid with the link\'s message; the link counts it and cannot be deleted', async () => {
      const link = await customLink({ confirmation_message: 'Thank you for your support.' });
      expect(link.payment_count).toBe(0);
      const context = await browser.newContext({ viewport: { width: 800, height: 1000 } });
      const page = await context.newPage();
      const payer = chain.payers[5];
      const wallet = await installTestWallet(page, chain.rpcUrl, payer.address);
      const problems: string[] = [];
      page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
      page.on('pageerror', (err) => problems.push(err.message));
      try {
        expect((await page.goto(`${origin}/pay/${link.id}`))?.status()).toBe(200);
        const button = page.locator('#pay-with-wallet');
        await button.waitFor({ state: 'visible' });
        await page.locator('#wallet-amount').fill('12.25');
        await page.locator('#wallet-email').fill('link-payer@example.test');
        const before = await chain.balanceOf(payer.address);
        await button.click();
        const line = page.locator('#payment-status');
        await line.filter({ hasText: /^Confirming/ }).waitFor({ timeout: STATE_TIMEOUT_MS });
        expect(await chain.balanceOf(payer.address)).toBe(before - 12_250_000n);
        expect(wallet.requests.filter((r) => r.method === 'eth_sendTransaction').length).toBe(2);
        await chain.mine(2);
        await line.filter({ hasText: 'Paid. Thank you! Thank you for your support.' }).waitFor({ timeout: STATE_TIMEOUT_MS });
        expect(await button.isHidden()).toBe(true);
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
      // The checkout is an invoice of the link, for the given email, now paid.
      const { rows } = await fx.api.pool.query<{ status: string; amount: string; email: string }>(
        `select i.status, i.amount::text as amount, c.email from invoices i join customers c on c.id = i.customer_id where i.payment_link_id = $1`,
        [link.id],
      );
      expect(rows).toEqual([{ status: 'paid', amount: '12.25', email: 'link-payer@example.test' }]);
      expect((await linkOf(link.id)).payment_count).toBe(1);
      const del = await api.del(`/v1/payment-links/${link.id}`, key());
      expect(del.status, del.raw).toBe(409);
      expect(del.body.error.code).toBe('payment_link_has_payments');
      // The receipt went to the payer once paid; no invoice email was ever owed for the checkout
      // (an anonymous visitor typed the address).
      await waitUntil(async () => sink.messages.some((m) => recipientsOf(m).includes('link-payer@example.test') && (m.subject ?? '').startsWith('Payment received')), STATE_TIMEOUT_MS);
      const { rows: owed } = await fx.api.pool.query<{ kind: string }>(
        `select d.kind from deliveries d join invoices i on i.id = d.invoice_id where i.payment_link_id = $1`,
        [link.id],
      );
      expect(owed).toEqual([{ kind: 'receipt' }]);
    });

    it('the link page asks for the amount (a range) and the email next to "Pay with wallet", with no inline script', async () => {
      const link = await customLink();
      const res = await fetch(`${origin}/pay/${link.id}`);
      const html = await res.text();
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(html).toContain('id="wallet-amount"');
      expect(html).toContain('id="wallet-email"');
      expect(html).toContain('id="pay-with-wallet"');
      expect(html).toContain(`data-checkout-url="/pay/${link.id}/checkout"`);
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      // One form for both ways to pay of a sandbox link: one amount field, one email field.
      expect(html.match(/Amount \(USDC\)/g)).toHaveLength(1);
      expect(html.match(/<input[^>]*name="amount"/g)).toHaveLength(1);
      expect(html.match(/<input[^>]*type="email"/g)).toHaveLength(1);
      expect(html).toContain('Simulate payment');
    });

    it('no email: the page asks for it in a sentence, not in the API\'s words, and makes no checkout', async () => {
      const link = await customLink();
      const context = await browser.newContext({ viewport: { width: 800, height: 1000 } });
      const page = await context.newPage();
      await installTestWallet(page, chain.rpcUrl, chain.payers[6].address);
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      try {
        await page.goto(`${origin}/pay/${link.id}`);
        await page.locator('#pay-with-wallet').waitFor({ state: 'visible' });
        await page.locator('#wallet-amount').fill('3');
        for (const email of ['', 'not-an-email']) {
          await page.locator('#wallet-email').fill(email);
          // Each refusal is this click's, not the last one's.
          await page.locator('#payment-status').evaluate((el) => {
            el.textContent = '';
          });
          await page.locator('#pay-with-wallet').click();
          const line = page.locator('#payment-status');
          await line.filter({ hasText: 'Enter your email address: your receipt is sent there.' }).waitFor({ timeout: STATE_TIMEOUT_MS });
          expect(await line.innerText()).not.toContain('customer_email');
          await page.locator('#pay-with-wallet:enabled').waitFor({ timeout: STATE_TIMEOUT_MS });
        }
        expect(requested.filter((u) => u.endsWith('/checkout'))).toEqual([]);
      } finally {
        await context.close();
      }
    });
  });

  it('checkout answers the reference, its status URL and the instructions of an open invoice of the link', async () => {
    const link = await customLink();
    const made = await checkout(link.id, { amount: '7', customer_email: 'someone@example.test' });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(made.body.status_url).toBe(`/pay/${made.body.reference}/status`);
    // The payer pays the amount; the merchant's share is it less the fee, as for any invoice.
    expect(made.body.instructions).toMatchObject({ total_atomic: '7000000', to: MERCHANT, chain_id: chain.chainId });
    const status = (await (await fetch(`${origin}${made.body.status_url}`)).json()) as JsonBody;
    expect(status).toMatchObject({ status: 'open', amount_atomic: '7000000', instructions: made.body.instructions });
    // An unpaid checkout is no payment of the link: the count stays 0 and the link can be deleted.
    expect((await linkOf(link.id)).payment_count).toBe(0);
    const del = await api.del(`/v1/payment-links/${link.id}`, key());
    expect(del.status, del.raw).toBe(200);
    const { rows } = await fx.api.pool.query('select status, payment_link_id from invoices where reference = $1', [made.body.reference]);
    expect(rows).toEqual([{ status: 'open', payment_link_id: null }]);
  });

  it('max_payments 1: a second checkout is refused once a checkout took a confirmed payment', async () => {
    const link = await customLink({ max_payments: 1 });
    const first = await checkout(link.id, { amount: '2', customer_email: 'first@example.test' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    // Nothing confirmed yet: another checkout may still be made.
    const meanwhile = await checkout(link.id, { amount: '3', customer_email: 'second@example.test' });
    expect(meanwhile.status, JSON.stringify(meanwhile.body)).toBe(200);
    await payCheckout(first.body.instructions);
    await waitUntil(async () => (await linkOf(link.id)).payment_count === 1, STATE_TIMEOUT_MS);
    const again = await checkout(link.id, { amount: '2', customer_email: 'third@example.test' });
    expect(again.status).toBe(400);
    expect(again.body.error.code).toBe('payment_link_exhausted');
    // The simulate path counts the same payments.
    const simulated = await api.post(`/v1/test_helpers/payment-links/${link.id}/payments`, key(), { amount: '2' });
    expect(simulated.status, simulated.raw).toBe(400);
    expect(simulated.body.error.code).toBe('payment_link_exhausted');
  });

  it('a checkout paid one atomic unit is no payment of the link: max_payments 1 still takes a buyer, the link keeps that money from its delete; paid in full, a checkout counts', async () => {
    const link = await customLink({ max_payments: 1 });
    // A review's attack: one atomic unit with the checkout's reference used up the link's one seat.
    const dust = await checkout(link.id, { amount: '20', customer_email: 'dust@example.test' });
    expect(dust.status, JSON.stringify(dust.body)).toBe(200);
    await chain.payWithReference({ to: dust.body.instructions.to, amountAtomic: 1n, feeAtomic: 0n, reference: dust.body.instructions.payment_reference });
    await chain.mine(2);
    await waitUntil(async () => ((await (await fetch(`${origin}${dust.body.status_url}`)).json()) as JsonBody).amount_paid_atomic === '1', STATE_TIMEOUT_MS);
    expect((await linkOf(link.id)).payment_count).toBe(0);
    const del = await api.del(`/v1/payment-links/${link.id}`, key());
    expect([del.status, del.body.error?.code]).toEqual([409, 'payment_link_has_payments']);
    // An honest buyer still gets the seat; paid in full, the checkout is the link's one payment.
    const honest = await checkout(link.id, { amount: '20', customer_email: 'honest@example.test' });
    expect(honest.status, JSON.stringify(honest.body)).toBe(200);
    await payCheckout(honest.body.instructions);
    await waitUntil(async () => (await linkOf(link.id)).payment_count === 1, STATE_TIMEOUT_MS);
    const again = await checkout(link.id, { amount: '20', customer_email: 'late@example.test' });
    expect([again.status, again.body.error?.code]).toEqual([400, 'payment_link_exhausted']);
  });

  it('refuses an amount out of range, a missing or bad email, an unknown link, a cross-site post; nothing is made', async () => {
    const link = await customLink();
    const out = await checkout(link.id, { amount: '51', customer_email: 'a@example.test' });
    expect(out.status).toBe(400);
    expect(out.body.error.code).toBe('amount_out_of_range');
    const noEmail = await checkout(link.id, { amount: '5' });
    expect(noEmail.status).toBe(400);
    expect(noEmail.body.error.code).toBe('validation_failed');
    expect(noEmail.body.error.message).toContain('customer_email');
    const badEmail = await checkout(link.id, { amount: '5', customer_email: 'not an email' });
    expect(badEmail.status).toBe(400);
    expect(badEmail.body.error.message).toContain('customer_email');
    const unknown = await checkout('plink_NoSuchLink000', { amount: '5', customer_email: 'a@example.test' });
    expect(unknown.status).toBe(404);
    const foreign = await checkout(link.id, { amount: '5', customer_email: 'a@example.test' }, { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error.code).toBe('permission_denied');
    const { rows } = await fx.api.pool.query('select count(*)::int as n from invoices where payment_link_id = $1', [link.id]);
    expect(rows[0].n).toBe(0);
  });
});
