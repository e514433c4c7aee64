// The subscription checkout page in real Chromium against a real chain (anvil with the
// SubscriptionManager and the 6-decimal test USDC, the API with the test operator): a recurring
// price's link shows what the customer authorises and "Subscribe with wallet", which approves
// (only when the allowance is short) and calls subscribe(terms) with the exact terms of the
// checkout, follows "confirming n of N" and says "subscribed" once the subscription exists.
// Plus `npm run subscribe` as a real process against the same API and chain. States are waited
// for, never times.
import { spawn } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { parseEventLogs, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import type { TestChain } from '../helpers/anvil.js';
import { chromiumPath, launchChromium, NO_CHROMIUM } from '../helpers/browser.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { TEST_OPERATOR, testOperatorAddress } from '../helpers/subscriptions.js';
import { installTestWallet } from '../helpers/test-wallet.js';
import { MULTI_STATE_TEST_TIMEOUT_MS, ROOT, waitUntil } from '../helpers/worker.js';

const CHROMIUM = chromiumPath();
const MERCHANT = '0x4444444444444444444444444444444444444444';
const STATE_TIMEOUT_MS = 30_000;

describe('Subscribing from the payment link page', { timeout: MULTI_STATE_TEST_TIMEOUT_MS }, () => {
  let chain: TestChain;
  let fx: ApiFixture;
  let origin: string;
  let fixture: ChainFixture | undefined;
  const api = apiClient(() => fx.api.app);
  const key = () => fx.merchant.keys.sandbox;

  beforeAll(async () => {
    fixture = await startChainFixture({ settlementAddress: MERCHANT, listen: true, deps: { operatorAddress: testOperatorAddress } });
    ({ chain, fx } = fixture);
    origin = fixture.origin!;
  }, 120_000);
  afterAll(async () => {
    await fixture?.close();
  });

  async function recurringLink(price: Record<string, unknown>): Promise<JsonBody> {
    const product = await api.post('/v1/products', key(), { name: 'Coffee club', prices: [{ network: 'local', ...price }] });
    expect(product.status, product.raw).toBe(200);
    const link = await api.post('/v1/payment-links', key(), { name: 'Coffee club', price_id: product.body.data.prices[0].id });
    expect(link.status, link.raw).toBe(200);
    return { ...link.body.data, product_id: product.body.data.id };
  }

  /** The watcher's Subscribed kind makes the subscription once the subscribe call is confirmed. */
  async function subscriptionOfCheckout(checkoutId: string): Promise<void> {
    await waitUntil(async () => {
      const { rows } = await fx.api.pool.query('select subscription_id from subscription_checkouts where id = $1', [checkoutId]);
      return rows[0].subscription_id !== null;
    }, STATE_TIMEOUT_MS, 100);
  }

  it('the page states the terms and what the customer authorises, with no one-time payment and no inline script', async () => {
    const link = await recurringLink({ amount: '4.5', cadence: 'monthly' });
    const res = await fetch(`${origin}/pay/${link.id}`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('4.50 USDC every month (30 days)');
    expect(html).toContain('id="subscribe-with-wallet"');
    expect(html).toContain('id="subscription-status"');
    expect(html).toContain(`data-subscribe-url="/pay/${link.id}/subscribe"`);
    // The fee inside the amount (50 bps), the allowance (12 periods), the contract, the cancel.
    expect(html).toContain('0.0225 USDC (0.50 %)');
    expect(html).toContain(`allow the subscription contract ${chain.subscriptionManager} to take up to 54.00 USDC (12 periods)`);
    expect(html).toContain('You can cancel at any time from your wallet');
    expect(html).not.toContain('id="pay-with-wallet"');
    expect(html).not.toContain('Simulate payment');
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);

    // An inactive product: the terms, a sentence, no button.
    expect((await api.patch(`/v1/products/${link.product_id}`, key(), { active: false })).status).toBe(200);
    const off = await (await fetch(`${origin}/pay/${link.id}`)).text();
    expect(off).toContain('no new subscriptions can start on it');
    expect(off).not.toContain('id="subscribe-with-wallet"');
  });

  describe.skipIf(!CHROMIUM)(`in Chromium${CHROMIUM ? '' : ` (${NO_CHROMIUM})`}`, () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium(CHROMIUM!);
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('approve then subscribe(terms) with the checkout\'s exact terms; "confirming n of N"; "subscribed"; a second subscription asks no approval', async () => {
      const link = await recurringLink({ amount: '2', cadence: 'custom', interval_seconds: 10 });
      const payer = chain.payers[3];
      const context = await browser.newContext({ viewport: { width: 800, height: 1200 } });
      const page = await context.newPage();
      const wallet = await installTestWallet(page, chain.rpcUrl, payer.address);
      const problems: string[] = [];
      page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
      page.on('pageerror', (err) => problems.push(err.message));
      const subscribeOnce = async (email: string): Promise<{ checkoutId: string; txHash: Hex; sentCount: number }> => {
        expect((await page.goto(`${origin}/pay/${link.id}`))?.status()).toBe(200);
        const button = page.locator('#subscribe-with-wallet');
        await button.waitFor({ state: 'visible' });
        await page.locator('#subscription-email').fill(email);
        const before = wallet.requests.length;
        await button.click();
        const line = page.locator('#subscription-status');
        await line.filter({ hasText: /^Confirming \d+ of 2/ }).waitFor({ timeout: STATE_TIMEOUT_MS });
        const sent = wallet.requests.slice(before).filter((r) => r.method === 'eth_sendTransaction');
        const { rows } = await fx.api.pool.query<{ id: string }>(
          `select k.id from subscription_checkouts k join customers c on c.id = k.customer_id where k.payment_link_id = $1 and c.email = $2`,
          [link.id, email],
        );
        expect(rows).toHaveLength(1);
        const txHash = (await line.locator('code').innerText()) as Hex;
        return { checkoutId: rows[0].id, txHash, sentCount: sent.length };
      };

      try {
        const before = await chain.balanceOf(payer.address);
        const first = await subscribeOnce('subscriber@example.test');
        // The allowance was short: approve, then subscribe.
        expect(first.sentCount).toBe(2);
        // The first period paid by the subscribe call itself.
        expect(await chain.balanceOf(payer.address)).toBe(before - 2_000_000n);
        const allowance = await chain.publicClient.readContract({ address: chain.token, abi: TEST_USDC_ABI, functionName: 'allowance', args: [payer.address, chain.subscriptionManager] });
        expect(allowance).toBe(24_000_000n - 2_000_000n);

        // What the contract holds is exactly the checkout's terms.
        const receipt = await chain.publicClient.getTransactionReceipt({ hash: first.txHash });
        const [event] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs });
        expect(event.address.toLowerCase()).toBe(chain.subscriptionManager.toLowerCase());
        const { rows: [terms] } = await fx.api.pool.query(
          `select checkout_reference, payee_address, token_address, amount_atomic::text as amount_atomic, period_seconds, fee_bps, fee_address, operator_address
           from subscription_checkouts where id = $1`,
          [first.checkoutId],
        );
        expect({
          checkout_reference: event.args.checkoutReference,
          payee_address: event.args.payee.toLowerCase(),
          token_address: event.args.token.toLowerCase(),
          amount_atomic: event.args.amount.toString(),
          period_seconds: event.args.period,
          fee_bps: event.args.feeBps,
          fee_address: event.args.feeAddress.toLowerCase(),
          operator_address: event.args.operator.toLowerCase(),
          ends_at: event.args.endsAt,
          subscriber: event.args.subscriber.toLowerCase(),
        }).toEqual({
          ...terms,
          payee_address: terms.payee_address.toLowerCase(),
          token_address: terms.token_address.toLowerCase(),
          fee_address: terms.fee_address.toLowerCase(),
          operator_address: TEST_OPERATOR.address.toLowerCase(),
          ends_at: 0,
          subscriber: payer.address.toLowerCase(),
        });
        expect(terms.fee_address.toLowerCase()).toBe(chain.feeAddress.toLowerCase());

        // Confirmed (two blocks on top), the subscription is made: the page says so.
        await chain.mine(2);
        await subscriptionOfCheckout(first.checkoutId);
        await page.locator('#subscription-status').filter({ hasText: 'Subscribed. Thank you!' }).waitFor({ timeout: STATE_TIMEOUT_MS });
        expect(await page.locator('#subscribe-with-wallet').isHidden()).toBe(true);

        // A second subscription from the same wallet: the allowance covers it, so no approval.
        const second = await subscribeOnce('second@example.test');
        expect(second.sentCount).toBe(1);
        await chain.mine(2);
        await subscriptionOfCheckout(second.checkoutId);
        await page.locator('#subscription-status').filter({ hasText: 'Subscribed.' }).waitFor({ timeout: STATE_TIMEOUT_MS });
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
      const subs = await api.get(`/v1/subscriptions?customer_email=subscriber@example.test`, key());
      expect(subs.body.data).toHaveLength(1);
      expect(subs.body.data[0]).toMatchObject({ status: 'active', subscriber_address: payer.address, contract_address: chain.subscriptionManager, interval_seconds: 10 });
    });

    it('a balance short of the first period: the page says so and nothing is sent', async () => {
      const link = await recurringLink({ amount: '1', cadence: 'daily' });
      const context = await browser.newContext({ viewport: { width: 800, height: 1200 } });
      const page = await context.newPage();
      // A fresh address: no test USDC.
      const empty: Address = '0x00000000000000000000000000000000000000e1';
      const wallet = await installTestWallet(page, chain.rpcUrl, empty);
      try {
        await page.goto(`${origin}/pay/${link.id}`);
        await page.locator('#subscribe-with-wallet').waitFor({ state: 'visible' });
        await page.locator('#subscription-email').fill('broke@example.test');
        await page.locator('#subscribe-with-wallet').click();
        await page.locator('#subscription-status').filter({ hasText: /is short of the 1\.00 USDC/ }).waitFor({ timeout: STATE_TIMEOUT_MS });
        expect(wallet.requests.filter((r) => r.method === 'eth_sendTransaction')).toEqual([]);
      } finally {
        await context.close();
      }
    });
  });

  /** `npm run subscribe -- <args>` (node on main/subscribe.ts: the same entrypoint, a second faster). */
  function subscribeCommand(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'main/subscribe.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, CHAINS_FILE: fixture!.chainsFile, PAYMENT_PAGE_BASE: `${origin}/pay`, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
  }

  it('npm run subscribe: by link id or page URL, from an anvil account, prints the transaction; refuses in one line what cannot be subscribed', async () => {
    const link = await recurringLink({ amount: '1.5', cadence: 'custom', interval_seconds: 30 });
    const payer = chain.payers[4];
    const byId = await subscribeCommand([link.id, '--email', 'cli@example.test', '--key', payer.privateKey]);
    expect(byId.stderr).toBe('');
    expect(byId.code).toBe(0);
    const hash = /transaction (0x[0-9a-f]{64}) in block \d+/.exec(byId.stdout)?.[1] as Hex | undefined;
    expect(hash, byId.stdout).toBeDefined();
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: hash! });
    const [event] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs });
    expect(event.args.subscriber).toBe(payer.address);
    const { rows } = await fx.api.pool.query(
      `select k.checkout_reference from subscription_checkouts k join customers c on c.id = k.customer_id where k.payment_link_id = $1 and c.email = 'cli@example.test'`,
      [link.id],
    );
    expect(rows).toEqual([{ checkout_reference: event.args.checkoutReference }]);
    // By the page's URL, from the default account 0 (its allowance short: approve first).
    const byUrl = await subscribeCommand([`${origin}/pay/${link.id}`]);
    expect(byUrl.code, byUrl.stderr).toBe(0);
    expect(byUrl.stdout).toMatch(/^Subscribed to payment link plink_\w+ from 0x[0-9a-fA-F]{40}: 1\.5 USDC every 30 s/);

    // Refusals: one line, exit 1, nothing sent.
    const once = await api.post('/v1/products', key(), { name: 'Once', prices: [{ network: 'local', amount: '1' }] });
    const onceLink = (await api.post('/v1/payment-links', key(), { name: 'Once', price_id: once.body.data.prices[0].id })).body.data;
    const nonce = await chain.publicClient.getTransactionCount({ address: chain.payers[0].address });
    for (const [args, message] of [
      [[onceLink.id], /^npm run subscribe: payment link plink_\w+ cannot be subscribed to: This payment link does not sell a subscription/],
      [['plink_doesnotexist'], /^npm run subscribe: payment link plink_doesnotexist cannot be subscribed to: /],
      [['inv_123'], /^npm run subscribe: "inv_123" names no payment link/],
      [[], /^npm run subscribe: which payment link\?/],
      [[link.id, '--key', '0x12'], /^npm run subscribe: --key must be a private key/],
    ] as [string[], RegExp][]) {
      const run = await subscribeCommand(args);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(message);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect(await chain.publicClient.getTransactionCount({ address: chain.payers[0].address })).toBe(nonce);
    // Seven node processes, a few seconds each to start on a loaded machine.
  }, 240_000);

  it('the checkout is refused when the page is not its origin, and the status endpoint follows the subscription', async () => {
    const link = await recurringLink({ amount: '3', cadence: 'weekly' });
    const refused = await fetch(`${origin}/pay/${link.id}/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://elsewhere.example', 'sec-fetch-site': 'cross-site' },
      body: JSON.stringify({ customer_email: 'x@example.test' }),
    });
    expect(refused.status).toBe(403);
    const made = await fetch(`${origin}/pay/${link.id}/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ customer_email: 'api@example.test' }),
    });
    const answer = (await made.json()) as JsonBody;
    expect(made.status, JSON.stringify(answer)).toBe(200);
    expect(answer).toMatchObject({ chain_id: chain.chainId, network: 'local', contract_address: chain.subscriptionManager, terms: { payee: MERCHANT, token: chain.token, operator: TEST_OPERATOR.address } });
    await waitUntil(async () => ((await (await fetch(`${origin}${answer.status_url}`)).json()) as JsonBody).status === 'pending', STATE_TIMEOUT_MS);
  });
});
