// The payment page in a real browser (chromium via playwright-core), the way a payer meets it:
// the link in a real sent email, JavaScript off, nothing loaded from anywhere else, one click on
// "Simulate payment", the page says paid, the receipt arrives. Plus a screenshot compared to a
// committed baseline, loosely (fonts hint differently from machine to machine).
import type { ParsedMail } from 'mailparser';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { chromiumPath, launchChromium, NO_CHROMIUM } from '../helpers/browser.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';
import { decodeQrPng } from '../helpers/qr.js';
import { expectLikeBaseline } from '../helpers/screenshot.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { MULTI_STATE_TEST_TIMEOUT_MS, startWorker } from '../helpers/worker.js';

const CHROMIUM = chromiumPath();
const BASELINE = new URL('../fixtures/payment-page.png', import.meta.url);
const SETTLEMENT = '0x2222222222222222222222222222222222222222';

const to = recipientsOf;
const decode = (s: string) => s.replace(/&#x3D;/g, '=').replace(/&amp;/g, '&').replace(/&#x2F;/g, '/');

describe.skipIf(!CHROMIUM)(`payment page in Chromium${CHROMIUM ? '' : ` (${NO_CHROMIUM})`}`, { timeout: MULTI_STATE_TEST_TIMEOUT_MS }, () => {
  let fx: ApiFixture;
  let sink: SmtpSink;
  let worker: WorkerRuntime;
  let browser: Browser;
  let origin: string;
  const api = apiClient(() => fx.api.app);
  const key = () => fx.merchant.keys.sandbox;

  beforeAll(async () => {
    sink = await startSmtpSink();
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const overrides = { SMTP_URL: sink.url, PORT: String(port), PAYMENT_PAGE_BASE: `${origin}/pay`, OUTBOX_RELAY_INTERVAL_MS: '100' };
    fx = await startApiFixture(overrides);
    await fx.api.app.listen({ port, host: '127.0.0.1' });
    await fx.api.pool.query("insert into settlement_addresses (account_id, environment, address) values ($1, 'sandbox', $2) on conflict (account_id, environment) do update set address = excluded.address", [fx.merchant.accountId, SETTLEMENT]);
    worker = await startWorker(fx.env.config(overrides));
    browser = await launchChromium(CHROMIUM!);
  });
  afterAll(async () => {
    await browser?.close();
    await worker?.close();
    await fx?.close();
    await sink?.close();
  });

  async function mailMatching(pred: (m: ParsedMail) => boolean): Promise<ParsedMail> {
    for (;;) {
      const found = sink.messages.find(pred);
      if (found) return found;
      await sink.waitFor(sink.messages.length + 1, 20_000);
    }
  }

  it('from the emailed link: amount and test-mode notice, Simulate payment, paid, receipt; JavaScript off, nothing external', async () => {
    const email = 'flow@example.test';
    const created = await api.post('/v1/invoices', key(), { customer_email: email, customer_name: 'Flo', amount: '42.5', due_at: '2031-06-30T12:00:00Z' });
    const inv = (await api.post(`/v1/invoices/${created.body.data.id}/send`, key())).body.data;
    const mail = await mailMatching((m) => to(m).includes(email));
    const href = /<a href="([^"]+)"[^>]*>Pay invoice<\/a>/.exec(String(mail.html))?.[1];
    expect(href).toBeDefined();
    const link = decode(href!);
    expect(link).toBe(`${origin}/pay/${inv.reference}`);

    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 800, height: 1000 } });
    const page = await context.newPage();
    const requested: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
    page.on('pageerror', (err) => problems.push(err.message));
    try {
      const res = await page.goto(link);
      expect(res?.status()).toBe(200);
      expect(await page.locator('.amount').innerText()).toBe('42.50 USDC');
      expect(await page.locator('.test').innerText()).toBe('TEST MODE: this is a test on the base-sepolia test network. No real funds move.');
      expect(await page.locator('.status').innerText()).toBe('Awaiting payment');
      // The QR code on the page decodes to the page's own address.
      expect(decodeQrPng(await page.locator('#page-qr svg').screenshot())).toBe(link);
      // And the wallet's: the EIP-681 request for the exact atomic amount.
      expect(decodeQrPng(await page.locator('#wallet-qr svg').screenshot())).toBe(
        `ethereum:0x036CbD53842c5426634e7929541eC2318f3dCF7e@84532/transfer?address=${SETTLEMENT}&uint256=42500000`,
      );

      await Promise.all([page.waitForURL(link), page.getByRole('button', { name: 'Simulate payment' }).click()]);
      expect(await page.locator('.status').innerText()).toBe('Paid');
      expect(await page.locator('.notice-ok').innerText()).toMatch(/^Paid on \d{1,2} [A-Z][a-z]{2} \d{4}\. Thank you!$/);
      expect(await page.getByRole('button', { name: 'Simulate payment' }).count()).toBe(0);
      expect((await api.get(`/v1/invoices/${inv.id}`, key())).body.data.status).toBe('paid');
      // The receipt: one "payment received" email with its PDF, in the captured mail.
      const receipt = await mailMatching((m) => to(m).includes(email) && (m.subject ?? '').startsWith('Payment received'));
      expect(receipt.subject).toBe(`Payment received: invoice ${inv.code} from Acme Widgets Ltd`);
      expect(receipt.text).toContain('Amount paid: 42.50 USDC on base-sepolia');
      expect(receipt.attachments.map((a) => a.filename)).toEqual([`receipt-${inv.code}.pdf`]);

      // Nothing but the page itself (and its own form post) was ever requested; no CSP report.
      expect(requested.every((u) => u.startsWith(`${origin}/pay/`)), requested.join('\n')).toBe(true);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('looks like the committed baseline (loosely: fonts hint differently between machines)', async () => {
    const created = await api.post('/v1/invoices', key(), {
      customer_email: 'shot@example.test',
      amount: '1234.5',
      due_at: '2031-06-30T12:00:00Z',
    });
    const id = created.body.data.id;
    await api.post(`/v1/invoices/${id}/send`, key());
    // A fixed reference and code: the QR codes and the text are the same on every run.
    await fx.api.pool.query(`update invoices set reference = 'BaselineReference001', code = 'TEST-INV-000123' where id = $1`, [id]);
    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 800, height: 1000 } });
    const page = await context.newPage();
    try {
      // The page's own URL carries this run's port, the payment reference its random salt: hidden.
      await page.goto(`${origin}/pay/BaselineReference001`);
      await expectLikeBaseline(page, BASELINE, [page.locator('#page-qr'), page.locator('#payment-reference')]);
    } finally {
      await context.close();
    }
  });
});
