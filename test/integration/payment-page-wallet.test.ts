// "Pay with wallet" on the payment page, in real Chromium with JavaScript on, against a real chain:
// anvil with the fee proxy and the 6-decimal test USDC, the API and a worker watching it. The
// wallet is a test EIP-1193 provider (test/helpers/test-wallet.ts) announced with EIP-6963 whose
// requests go to anvil, where the well-known accounts sign. Every state is waited for on the page
// or through the API, never a clock. Plus a screenshot of the page with its button.
import type { ParsedMail } from 'mailparser';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import { chromiumPath, launchChromium, NO_CHROMIUM } from '../helpers/browser.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { expectLikeBaseline } from '../helpers/screenshot.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { installTestWallet, type TestWallet } from '../helpers/test-wallet.js';
import { MULTI_STATE_TEST_TIMEOUT_MS, waitUntil } from '../helpers/worker.js';

const CHROMIUM = chromiumPath();
const BASELINE = new URL('../fixtures/payment-page-wallet.png', import.meta.url);
const PARTIAL_BASELINE = new URL('../fixtures/payment-page-partially-paid.png', import.meta.url);
const PAID_BASELINE = new URL('../fixtures/payment-page-paid.png', import.meta.url);
/** The merchant's address: fixed, so the page (and its screenshot) is the same on every run. */
const MERCHANT = '0x3333333333333333333333333333333333333333';
const STATE_TIMEOUT_MS = 30_000;

const decode = (s: string) => s.replace(/&#x3D;/g, '=').replace(/&amp;/g, '&').replace(/&#x2F;/g, '/');

describe.skipIf(!CHROMIUM)(`Pay with wallet in Chromium${CHROMIUM ? '' : ` (${NO_CHROMIUM})`}`, { timeout: MULTI_STATE_TEST_TIMEOUT_MS }, () => {
  let chain: TestChain;
  let fx: ApiFixture;
  let sink: SmtpSink;
  let browser: Browser;
  let origin: string;
  const api = apiClient(() => fx.api.app);
  const key = () => fx.merchant.keys.sandbox;

  let fixture: ChainFixture | undefined;
  beforeAll(async () => {
    fixture = await startChainFixture({ settlementAddress: MERCHANT, listen: true });
    ({ chain, fx, sink } = fixture);
    origin = fixture.origin!;
    browser = await launchChromium(CHROMIUM!);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await fixture?.close();
  });

  async function sentInvoice(amount: string, email = `payer-${Math.random().toString(36).slice(2)}@example.test`): Promise<JsonBody> {
    const created = await api.post('/v1/invoices', key(), { customer_email: email, amount, network: 'local', currency: 'USDC', due_at: '2031-06-30T12:00:00Z' });
    expect(created.status, created.raw).toBe(200);
    const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
    expect(sent.status, sent.raw).toBe(200);
    return sent.body.data;
  }
  const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;

  async function mailMatching(pred: (m: ParsedMail) => boolean): Promise<ParsedMail> {
    for (;;) {
      const found = sink.messages.find(pred);
      if (found) return found;
      await sink.waitFor(sink.messages.length + 1, 20_000);
    }
  }

  /** A page with the test wallet reporting `account`; console errors and foreign requests collected. */
  async function openWithWallet(account: string): Promise<{ context: BrowserContext; page: Page; wallet: TestWallet; problems: string[]; requested: string[] }> {
    const context = await browser.newContext({ viewport: { width: 800, height: 1000 } });
    const page = await context.newPage();
    const wallet = await installTestWallet(page, chain.rpcUrl, account);
    const problems: string[] = [];
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
    page.on('pageerror', (err) => problems.push(err.message));
    return { context, page, wallet, problems, requested };
  }

  const status = (page: Page) => page.locator('#payment-status');
  const waitForStatus = (page: Page, text: string | RegExp) => status(page).filter({ hasText: text }).waitFor({ timeout: STATE_TIMEOUT_MS });
  const sends = (wallet: TestWallet) => wallet.requests.filter((r) => r.method === 'eth_sendTransaction').length;
  const waitForPaid = (page: Page) => page.locator('#invoice-status').filter({ hasText: /^Paid$/ }).waitFor({ timeout: STATE_TIMEOUT_MS });
  /** The paid page: its payments listed (amount, transaction), nothing left to pay with. */
  async function expectPaidPage(page: Page, payments: { amount: string; txHash: string }[]): Promise<void> {
    expect(await page.locator('#invoice-status').innerText()).toBe('Paid');
    expect(await page.locator('main').innerText()).toMatch(/Paid on .+\. Thank you!/);
    const rows = await page.locator('#payments li').allInnerTexts();
    expect(rows).toEqual(payments.map((p) => `${p.amount} ${p.txHash}`));
    for (const gone of ['#wallet-qr', '#page-qr', '#simulate', '#pay-with-wallet', '#how-to-pay', '#transfer-help']) {
      expect(await page.locator(gone).count(), gone).toBe(0);
    }
  }

  it('from the emailed link: Pay with wallet adds the chain, approves, pays; the transaction, "confirming", then paid; the receipt arrives', async () => {
    const email = 'wallet-flow@example.test';
    const inv = await sentInvoice('12.5', email);
    const mail = await mailMatching((m) => recipientsOf(m).includes(email));
    const href = /<a href="([^"]+)"[^>]*>Pay invoice<\/a>/.exec(String(mail.html))?.[1];
    expect(href).toBeDefined();
    const link = decode(href!);
    expect(link).toBe(`${origin}/pay/${inv.reference}`);

    const payer = chain.payers[1];
    const { context, page, wallet, problems, requested } = await openWithWallet(payer.address);
    // The wallet starts on Ethereum and does not know the local chain: the page adds it.
    wallet.chainId = '0x1';
    wallet.knownChains = new Set(['0x1']);
    try {
      expect((await page.goto(link))?.status()).toBe(200);
      expect(await page.locator('#payment-reference').innerText()).toBe(inv.payment_instructions.payment_reference);
      const button = page.locator('#pay-with-wallet');
      await button.waitFor({ state: 'visible' });
      expect(await button.innerText()).toBe('Pay with wallet');
      const before = await chain.balanceOf(payer.address);
      await button.click();
      await waitForStatus(page, /^Confirming 0 of 2/);
      // The transaction is shown; the local chain has no explorer, so it is not a link.
      const txHash = await status(page).locator('code').innerText();
      expect(txHash).toMatch(/^0x[0-9a-f]{64}$/);
      expect(await status(page).locator('a').count()).toBe(0);
      expect(wallet.added).toEqual([
        expect.objectContaining({ chainId: '0x7a69', chainName: 'local', rpcUrls: [chain.rpcUrl], nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 } }),
      ]);
      // approve (the allowance was short), then the proxy call: two transactions, nothing else.
      expect(sends(wallet)).toBe(2);
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: txHash as `0x${string}` });
      expect(receipt.to?.toLowerCase()).toBe(chain.feeProxy.toLowerCase());
      expect(await chain.balanceOf(payer.address)).toBe(before - 12_500_000n);

      await chain.mine(2);
      // The page becomes the paid page, without a reload: badge, the amount paid and its
      // transaction; no QR code, no simulate button, no wallet button.
      await waitForPaid(page);
      await expectPaidPage(page, [{ amount: '12.50 USDC', txHash }]);
      expect((await invoice(inv.id)).status).toBe('paid');
      // A reload shows the same page.
      const shown = await page.locator('main').innerHTML();
      await page.reload();
      expect(await page.locator('main').innerHTML()).toBe(shown);
      const paidMail = await mailMatching((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Payment received'));
      expect(paidMail.subject).toBe(`Payment received: invoice ${inv.code} from Acme Widgets Ltd`);
      // Only the page's own origin: the page, its script, its status; the wallet's calls go elsewhere.
      expect(requested.every((u) => u.startsWith(`${origin}/pay/`)), requested.join('\n')).toBe(true);
      expect(requested.some((u) => /\/pay\/assets\/pay\.[0-9a-f]{16}\.js$/.test(u))).toBe(true);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('a request rejected in the wallet says so and sends nothing; trying again pays', async () => {
    const inv = await sentInvoice('3');
    const { context, page, wallet } = await openWithWallet(chain.payers[2].address);
    wallet.rejectOnce.add('eth_sendTransaction');
    try {
      await page.goto(`${origin}/pay/${inv.reference}`);
      const button = page.locator('#pay-with-wallet');
      await button.click();
      await waitForStatus(page, 'You rejected the request in your wallet.');
      expect(await status(page).getAttribute('data-state')).toBe('rejected');
      expect(await button.isEnabled()).toBe(true);
      // The rejected approve never reached the chain.
      expect(await chain.publicClient.getTransactionCount({ address: chain.payers[2].address })).toBe(0);

      await button.click();
      await waitForStatus(page, /^Confirming/);
      await chain.mine(2);
      await waitForPaid(page);
      expect((await invoice(inv.id)).status).toBe('paid');
    } finally {
      await context.close();
    }
  });

  it('a balance short of the amount says so and sends nothing', async () => {
    const inv = await sentInvoice('1235.5');
    const empty = privateKeyToAccount(generatePrivateKey()).address;
    const { context, page, wallet } = await openWithWallet(empty);
    try {
      await page.goto(`${origin}/pay/${inv.reference}`);
      await page.locator('#pay-with-wallet').click();
      // Amounts as everywhere else on the page: grouped, two decimals at least.
      await waitForStatus(page, 'Your balance, 0.00 USDC, is short of the 1,235.50 USDC to pay. Nothing was sent.');
      expect(sends(wallet)).toBe(0);
      expect((await invoice(inv.id)).status).toBe('open');
    } finally {
      await context.close();
    }
  });

  it('after a partial payment, the page shows what remains and pays the rest', async () => {
    const inv = await sentInvoice('30');
    const pi = inv.payment_instructions;
    // 10 of the 30 paid through the proxy by the harness, its fee by the same rule (0.5 %).
    await chain.payWithReference({ to: pi.to, amountAtomic: 9_950_000n, feeAtomic: 50_000n, reference: pi.payment_reference, feeAddress: pi.fee_address });
    await chain.mine(2);
    await waitUntil(async () => (await invoice(inv.id)).amount_paid_atomic === '10000000', STATE_TIMEOUT_MS);

    const payer = chain.payers[3];
    const { context, page } = await openWithWallet(payer.address);
    try {
      await page.goto(`${origin}/pay/${inv.reference}`);
      expect(await page.locator('#partially-paid').innerText()).toBe('Received so far: 10.00 USDC. Remaining to pay: 20.00 USDC.');
      const button = page.locator('#pay-with-wallet');
      expect(await button.innerText()).toBe('Pay the rest with wallet');
      const before = await chain.balanceOf(payer.address);
      await button.click();
      await waitForStatus(page, /^Confirming/);
      expect(await chain.balanceOf(payer.address)).toBe(before - 20_000_000n);
      await chain.mine(2);
      await waitForPaid(page);
      expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '30000000' });
    } finally {
      await context.close();
    }
  });

  it('USDC but no ETH for the fee: says the network\'s own token is needed, in words, and sends nothing', async () => {
    const inv = await sentInvoice('4');
    const noGas = privateKeyToAccount(generatePrivateKey()).address;
    await chain.transfer({ from: chain.payers[6].address, to: noGas, amountAtomic: 10_000_000n });
    const { context, page, wallet } = await openWithWallet(noGas);
    try {
      await page.goto(`${origin}/pay/${inv.reference}`);
      await page.locator('#pay-with-wallet').click();
      const noEth = 'Your wallet has no ETH for the network fee on local. Add some ETH, the network\'s own token, to this account, then try again. Nothing was sent.';
      await waitForStatus(page, noEth);
      expect(await status(page).innerText()).not.toContain('gas * gas fee');
      expect(sends(wallet)).toBe(0);
      // Some ETH, not enough for the fee: the node refuses the send, and the page says the same
      // thing in words, not viem's "The total cost (gas * gas fee + value) ...".
      await chain.testClient.setBalance({ address: noGas, value: 1n });
      await chain.testClient.impersonateAccount({ address: noGas });
      await status(page).evaluate((el) => {
        el.textContent = '';
      });
      await page.locator('#pay-with-wallet').click();
      await waitForStatus(page, noEth);
      expect(await status(page).innerText()).not.toContain('gas * gas fee');
      expect(await chain.publicClient.getTransactionCount({ address: noGas })).toBe(0);
      expect((await invoice(inv.id)).status).toBe('open');
    } finally {
      await context.close();
    }
  });

  // Two payments, each approved, paid and confirmed, then two emails: twice the first test's work.
  it('a split payment by wallet: the page becomes partially paid (what remains, QR and button for it), then paid, without a reload; one acknowledgement email for the part, a receipt listing both payments', async () => {
    const email = 'split-payer@example.test';
    const created = await sentInvoice('1235.5', email);
    // A fixed reference and code: the page (and its screenshots) is the same on every run.
    await fx.api.pool.query(`update invoices set reference = 'SplitBaseline0000001', code = 'TEST-INV-000125' where id = $1`, [created.id]);
    const payer = chain.payers[5];
    const { context, page, wallet, problems } = await openWithWallet(payer.address);
    // The wallet is handed instructions for 500 of the 1,235.50 once (as if the invoice had asked
    // for less): a real partial payment through the proxy, with the invoice's reference.
    let shortOnce = true;
    await page.route('**/pay/SplitBaseline0000001/status', async (route) => {
      const response = await route.fetch();
      const body = (await response.json()) as JsonBody;
      if (shortOnce && body.instructions) {
        shortOnce = false;
        body.instructions = { ...body.instructions, amount_atomic: '497500000', fee_atomic: '2500000', total_atomic: '500000000' };
      }
      await route.fulfill({ response, json: body });
    });
    const masks = () => [page.locator('#page-qr'), page.locator('#payment-reference'), page.locator('#payments code')];
    try {
      await page.goto(`${origin}/pay/SplitBaseline0000001`);
      const button = page.locator('#pay-with-wallet');
      expect(await button.innerText()).toBe('Pay with wallet');
      await button.click();
      await waitForStatus(page, /^Confirming/);
      const firstTx = await status(page).locator('code').innerText();
      await chain.mine(2);
      // Partially paid, in place: the headline is what remains; the QR code, the instructions and
      // the button are for the remainder; the payment received is listed.
      await page.locator('#invoice-status').filter({ hasText: 'Partially paid' }).waitFor({ timeout: STATE_TIMEOUT_MS });
      expect(await page.locator('#headline-amount').innerText()).toBe('735.50 USDC');
      expect(await page.locator('#partially-paid').innerText()).toBe('Received so far: 500.00 USDC. Remaining to pay: 735.50 USDC.');
      expect(await page.locator('#wallet-qr').innerText()).toContain('Send exactly 735.50 USDC');
      expect(await page.locator('#wallet-qr code').innerText()).toContain('uint256=735500000');
      expect(await page.locator('#transfer-help').innerText()).toContain('send exactly 735.50 USDC');
      expect(await page.locator('#payments li').allInnerTexts()).toEqual([`500.00 USDC ${firstTx}`]);
      expect(await button.innerText()).toBe('Pay the rest with wallet');
      expect(await status(page).innerText()).toBe('Payment received. Remaining to pay: 735.50 USDC.');
      expect(await page.locator('main').innerText()).not.toContain('Paid. Thank you!');
      await expectLikeBaseline(page, PARTIAL_BASELINE, masks());
      // A reload shows the same state.
      const state = await page.locator('#invoice-state').innerHTML();
      const ways = await page.locator('#wallet-qr').innerHTML();
      await page.reload();
      expect(await page.locator('#invoice-state').innerHTML()).toBe(state);
      expect(await page.locator('#wallet-qr').innerHTML()).toBe(ways);

      // The rest, from the reloaded page's button.
      await button.waitFor({ state: 'visible' });
      await button.click();
      await waitForStatus(page, /^Confirming/);
      const secondTx = await status(page).locator('code').innerText();
      await chain.mine(2);
      await waitForPaid(page);
      await expectPaidPage(page, [
        { amount: '500.00 USDC', txHash: firstTx },
        { amount: '735.50 USDC', txHash: secondTx },
      ]);
      await expectLikeBaseline(page, PAID_BASELINE, masks());
      await page.reload();
      await expectPaidPage(page, [
        { amount: '500.00 USDC', txHash: firstTx },
        { amount: '735.50 USDC', txHash: secondTx },
      ]);
      // approve and pay, twice: each approval is for exactly what that click pays.
      expect(sends(wallet)).toBe(4);
      expect(problems).toEqual([]);

      // The customer's mail: one acknowledgement of the part (what arrived, what remained, the
      // link), and the receipt listing both payments, in the email and in its PDF.
      const receipt = await mailMatching((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Payment received'));
      const ack = await mailMatching((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Partial payment received'));
      expect(ack.subject).toBe('Partial payment received: 500.00 USDC toward invoice TEST-INV-000125 from Acme Widgets Ltd');
      expect(ack.text).toContain('Received: 500.00 USDC');
      expect(ack.text).toContain(`Transaction: ${firstTx}`);
      expect(ack.text).toContain('Remaining to pay: 735.50 USDC');
      expect(ack.text).toContain(`Pay the rest: ${origin}/pay/SplitBaseline0000001`);
      expect(ack.attachments).toHaveLength(0);
      expect(receipt.text).toContain(`Transaction: ${firstTx} (500.00 USDC)`);
      expect(receipt.text).toContain(`Transaction: ${secondTx} (735.50 USDC)`);
      const pdf = (await extractPdfText(receipt.attachments[0].content)).join('').replace(/\s+/g, '');
      expect(pdf).toContain(`Transaction:${firstTx}(500.00USDC)`);
      expect(pdf).toContain(`Transaction:${secondTx}(735.50USDC)`);
      // Exactly one acknowledgement: one delivery for the one partial payment, sent, one message.
      // (A row is recorded sent once SMTP took its message, which the sink can hold a moment before.)
      const deliveries = async () =>
        (await fx.api.pool.query<{ kind: string; status: string }>(
          `select kind, status from deliveries where invoice_id = $1 and kind in ('partial_payment', 'receipt') order by kind`,
          [created.id],
        )).rows;
      await waitUntil(async () => (await deliveries()).every((r) => r.status !== 'pending'), STATE_TIMEOUT_MS);
      const rows = await deliveries();
      expect(rows).toEqual([{ kind: 'partial_payment', status: 'sent' }, { kind: 'receipt', status: 'sent' }]);
      expect(sink.messages.filter((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Partial payment received'))).toHaveLength(1);
    } finally {
      await context.close();
    }
  });

  it('GET /pay/<reference>/status: public facts only, for the script', async () => {
    const inv = await sentInvoice('7');
    const res = await fetch(`${origin}/pay/${inv.reference}/status`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as JsonBody;
    expect(body).toEqual({
      status: 'open',
      currency: 'USDC',
      amount_atomic: '7000000',
      amount_paid_atomic: '0',
      amount_remaining_atomic: '7000000',
      required_confirmations: 2,
      payments: [],
      instructions: inv.payment_instructions,
      chain: { chain_id: chain.chainId, name: 'local', rpc_url: chain.rpcUrl, explorer_url: null, native_symbol: 'ETH' },
    });
    expect(JSON.stringify(body)).not.toContain('@');
    expect(JSON.stringify(body)).not.toContain(inv.id);
    const missing = await fetch(`${origin}/pay/NoSuchReference123/status`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as JsonBody).error.code).toBe('resource_missing');
  });

  it('serves the script under its hashed name for a year, anything else under /pay/assets/ is a 404', async () => {
    const inv = await sentInvoice('1');
    const html = await (await fetch(`${origin}/pay/${inv.reference}`)).text();
    const src = /<script src="(\/pay\/assets\/pay\.[0-9a-f]{16}\.js)" defer><\/script>/.exec(html)?.[1];
    expect(src).toBeDefined();
    const script = await fetch(`${origin}${src}`);
    expect(script.status).toBe(200);
    expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect((await fetch(`${origin}/pay/assets/pay.0000000000000000.js`)).status).toBe(404);
  });

  it('looks like the committed baseline with its button (loosely: fonts hint differently between machines)', async () => {
    const created = await sentInvoice('1234.5', 'shot-wallet@example.test');
    await fx.api.pool.query(`update invoices set reference = 'WalletBaseline000001', code = 'TEST-INV-000124' where id = $1`, [created.id]);
    const { context, page } = await openWithWallet(chain.payers[4].address);
    try {
      await page.goto(`${origin}/pay/WalletBaseline000001`);
      await page.locator('#pay-with-wallet').waitFor({ state: 'visible' });
      // The page's own URL carries this run's port, the payment reference its random salt: hidden.
      await expectLikeBaseline(page, BASELINE, [page.locator('#page-qr'), page.locator('#payment-reference')]);
    } finally {
      await context.close();
    }
  });
});
