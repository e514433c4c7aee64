// Subscriptions end to end (issue 26, "Proof") on anvil with nothing stood in: the API and a real
// worker (the watcher with the Subscribed / Charged / Canceled kinds, the subscription jobs and the
// service's own relayer, keyed by RELAYER_PRIVATE_KEY_<chainId>, whose address the API names as
// the operator of new checkouts). A customer subscribes from the link's page in Chromium with the
// injected wallet; the watcher makes the subscription; the worker charges the next period through
// the relayer; the customer cancels on-chain; the merchant cancels over the API and the relayer's
// on-chain cancel is confirmed.
//
// The sandbox price's interval is 10 s (the sandbox minimum). Every state is waited for with a
// generous timeout (the machine is shared), never a time.
import type { Browser } from 'playwright-core';
import { createWalletClient, http, parseEventLogs, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import type { WellKnownAccount } from '../../src/devchain/accounts.js';
import { sendSubscription } from '../../src/devchain/subscribe-command.js';
import type { SubscriptionCheckoutAnswer } from '../../src/http/schemas/payment-page.js';
import type { TestChain } from '../helpers/anvil.js';
import { chromiumPath, launchChromium, NO_CHROMIUM } from '../helpers/browser.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { recipientsOf, type SmtpSink } from '../helpers/smtp-sink.js';
import { installTestWallet } from '../helpers/test-wallet.js';
import { waitUntil } from '../helpers/worker.js';
import { keepMining } from '../helpers/subscriptions.js';

const CHROMIUM = chromiumPath();
const INTERVAL_S = 10;
const AMOUNT_ATOMIC = 2_000_000n; // 2 USDC, 6 decimals
// A state the worker or the watcher reaches: generous, the machine is loaded.
const STATE_TIMEOUT_MS = 90_000;
const MERCHANT = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);

let fixture: ChainFixture | undefined;
let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
let origin: string;
let linkId: string;
let priceId: string;
let miner: NodeJS.Timeout | undefined;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

beforeAll(async () => {
  fixture = await startChainFixture({
    settlementAddress: MERCHANT,
    listen: true,
    env: {
      [`RELAYER_PRIVATE_KEY_31337`]: operatorKey,
      SUBSCRIPTION_POLL_INTERVAL_MS: '200',
    },
  });
  ({ chain, fx, sink } = fixture);
  origin = fixture.origin!;
  await chain.testClient.setBalance({ address: operator.address, value: 10n ** 20n });
  const product = await api.post('/v1/products', key(), { name: 'Coffee club', prices: [{ network: 'local', amount: '2', cadence: 'custom', interval_seconds: INTERVAL_S }] });
  expect(product.status, product.raw).toBe(200);
  priceId = product.body.data.prices[0].id;
  const link = await api.post('/v1/payment-links', key(), { name: 'Coffee club', price_id: priceId });
  expect(link.status, link.raw).toBe(200);
  linkId = link.body.data.id;
  // A live chain makes a block every second or so; anvil only when a transaction comes. Without
  // blocks nothing is confirmed and a period never begins for the chain (a charge is simulated
  // at the latest block's time).
  miner = keepMining(chain);
}, 180_000);

afterAll(async () => {
  clearInterval(miner);
  await fixture?.close();
});

// --- helpers ---

const receiptsTo = (email: string) => sink.messages.filter((m) => recipientsOf(m).includes(email) && (m.subject ?? '').startsWith('Payment received'));

async function subscriptionOf(email: string): Promise<JsonBody | null> {
  const res = await api.get(`/v1/subscriptions?customer_email=${encodeURIComponent(email)}`, key());
  expect(res.status, res.raw).toBe(200);
  return res.body.data[0] ?? null;
}

async function getSubscription(id: string): Promise<JsonBody> {
  const res = await api.get(`/v1/subscriptions/${id}`, key());
  expect(res.status, res.raw).toBe(200);
  return res.body.data;
}

interface PeriodInvoice {
  id: string;
  status: string;
  period_index: number;
  period_start: Date;
  period_end: Date;
}

/** Its period invoices (the invoice object names no period index: read from the schema), and the API's list of them agreeing. */
async function periodInvoices(id: string): Promise<PeriodInvoice[]> {
  const { rows } = await fx.api.pool.query<PeriodInvoice>(
    'select id, status, period_index, period_start, period_end from invoices where subscription_id = $1 order by period_index',
    [id],
  );
  const res = await api.get(`/v1/subscriptions/${id}/invoices?limit=100`, key());
  expect(res.status, res.raw).toBe(200);
  const listed = new Set((res.body.data as JsonBody[]).map((i) => i.id as string));
  expect(rows.filter((r) => !listed.has(r.id))).toEqual([]);
  return rows;
}

/** The subscription the watcher made for `email`, once it exists (Subscribed confirmed). */
async function waitSubscription(email: string): Promise<JsonBody> {
  let sub: JsonBody | null = null;
  await waitUntil(async () => (sub = await subscriptionOf(email)) !== null, STATE_TIMEOUT_MS, 250);
  return sub!;
}

/** What the page's script does, without the page: the checkout over HTTP, then approve when short and subscribe(terms) from `payer`. */
async function subscribeByScript(payer: WellKnownAccount, email: string): Promise<{ onchainId: bigint }> {
  const res = await fetch(`${origin}/pay/${linkId}/subscribe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin, 'sec-fetch-site': 'same-origin' },
    body: JSON.stringify({ customer_email: email }),
  });
  const answer = (await res.json()) as SubscriptionCheckoutAnswer;
  expect(res.status, JSON.stringify(answer)).toBe(200);
  expect(answer.terms.operator.toLowerCase()).toBe(operator.address.toLowerCase());
  const sent = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
  return { onchainId: sent.onchainId };
}

/** The Charged logs of subscription `onchainId`, as the chain holds them. */
async function chargedLogs(onchainId: bigint) {
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', fromBlock: 0n });
  return logs.filter((l) => l.args.id === onchainId);
}

const latestBlockTime = async () => Number((await chain.publicClient.getBlock()).timestamp) * 1000;

// --- the scenarios ---

describe.skipIf(!CHROMIUM)(`subscribed from the page in Chromium${CHROMIUM ? '' : ` (${NO_CHROMIUM})`}`, () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium(CHROMIUM!);
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('subscribe with the injected wallet -> active with every field, period 0 paid + receipt; period 1 charged by the worker through the relayer -> paid + receipt, next_charge_at advanced', async () => {
    const payer = chain.payers[3];
    const email = 'e2e-page@example.test';
    const before = await chain.balanceOf(payer.address);
    const context = await browser.newContext({ viewport: { width: 800, height: 1200 } });
    const page = await context.newPage();
    const wallet = await installTestWallet(page, chain.rpcUrl, payer.address);
    const problems: string[] = [];
    page.on('console', (msg) => msg.type() === 'error' && problems.push(msg.text()));
    page.on('pageerror', (err) => problems.push(err.message));
    let txHash: Hex;
    try {
      expect((await page.goto(`${origin}/pay/${linkId}`))?.status()).toBe(200);
      await page.locator('#subscribe-with-wallet').waitFor({ state: 'visible' });
      await page.locator('#subscription-email').fill(email);
      await page.locator('#subscribe-with-wallet').click();
      // The watcher (no stand-in) confirms the Subscribed log and makes the subscription; the page follows it.
      await page.locator('#subscription-status').filter({ hasText: 'Subscribed. Thank you!' }).waitFor({ timeout: STATE_TIMEOUT_MS });
      txHash = (await page.locator('#subscription-status code').innerText().catch(() => '')) as Hex;
      const sent = wallet.requests.filter((r) => r.method === 'eth_sendTransaction');
      expect(sent).toHaveLength(2); // approve (the allowance was short), then subscribe
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }

    const sub = await waitSubscription(email);
    const { rows: [checkout] } = await fx.api.pool.query(
      `select k.id, k.invoice_id, k.checkout_reference, k.fee_address, k.subscription_id from subscription_checkouts k join customers c on c.id = k.customer_id
       where k.payment_link_id = $1 and c.email = $2`,
      [linkId, email],
    );
    expect(checkout.subscription_id).toBe(sub.id);
    // Every field from the chain and the price.
    const subscribedLogs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', fromBlock: 0n });
    const event = subscribedLogs.find((l) => l.args.checkoutReference === checkout.checkout_reference)!;
    expect(event).toBeDefined();
    if (txHash! && txHash.startsWith('0x')) expect(event.transactionHash).toBe(txHash);
    const block = await chain.publicClient.getBlock({ blockNumber: event.blockNumber });
    const startedAt = Number(block.timestamp) * 1000;
    expect(sub).toMatchObject({
      status: 'active',
      mode: 'pull',
      contract_address: chain.subscriptionManager,
      onchain_id: event.args.id!.toString(),
      platform_fee_bps: event.args.feeBps,
      interval_seconds: INTERVAL_S,
      ends_at: null,
      customer_email: email,
      price_id: priceId,
      subscriber_address: payer.address,
      canceled_at: null,
      canceled_by: null,
    });
    expect(Date.parse(sub.started_at)).toBe(startedAt);
    expect(Date.parse(sub.current_period_start)).toBeGreaterThanOrEqual(startedAt);
    expect(sub.customer_id).toMatch(/^cus_/);
    // Period 0 is the checkout's invoice, paid by the subscribe call itself; its receipt goes out.
    await waitUntil(async () => (await periodInvoices(sub.id)).some((i) => i.id === checkout.invoice_id && i.status === 'paid'), STATE_TIMEOUT_MS, 250);
    const [period0] = (await periodInvoices(sub.id)).filter((i) => i.id === checkout.invoice_id);
    expect(period0.period_index).toBe(0);
    expect(period0.period_start.getTime()).toBe(startedAt);
    expect(period0.period_end.getTime()).toBe(startedAt + INTERVAL_S * 1000);
    await waitUntil(async () => receiptsTo(email).length >= 1, STATE_TIMEOUT_MS, 250);

    // Period 1: the worker makes its invoice at started_at + interval and charges it through the relayer; the watcher confirms it.
    await waitUntil(async () => (await periodInvoices(sub.id)).some((i) => i.period_index === 1 && i.status === 'paid'), STATE_TIMEOUT_MS, 250);
    const [period1] = (await periodInvoices(sub.id)).filter((i) => i.period_index === 1);
    expect(period1.period_start.getTime()).toBe(startedAt + INTERVAL_S * 1000);
    expect(period1.period_end.getTime()).toBe(startedAt + 2 * INTERVAL_S * 1000);
    const charged = await chargedLogs(event.args.id!);
    expect(charged.filter((l) => l.args.periodIndex === 1)).toHaveLength(1);
    // Sent by the relayer's key (the operator), recorded before its broadcast.
    const chargeTx = await chain.publicClient.getTransaction({ hash: charged.find((l) => l.args.periodIndex === 1)!.transactionHash });
    expect(chargeTx.from.toLowerCase()).toBe(operator.address.toLowerCase());
    const { rows: recorded } = await fx.api.pool.query('select 1 from relayer_transactions where lower(tx_hash) = lower($1)', [chargeTx.hash]);
    expect(recorded).toHaveLength(1);
    await waitUntil(async () => receiptsTo(email).length >= 2, STATE_TIMEOUT_MS, 250);
    const advanced = await getSubscription(sub.id);
    expect(advanced.status).toBe('active');
    expect(Date.parse(advanced.current_period_start)).toBeGreaterThanOrEqual(startedAt + INTERVAL_S * 1000);
    expect(Date.parse(advanced.next_charge_at)).toBeGreaterThanOrEqual(startedAt + 2 * INTERVAL_S * 1000);
    // The payer paid exactly two periods so far (a third may have begun on a slow run: at most three).
    const paid = before - (await chain.balanceOf(payer.address));
    expect(paid % AMOUNT_ATOMIC).toBe(0n);
    expect(paid / AMOUNT_ATOMIC).toBeGreaterThanOrEqual(2n);
    expect(paid / AMOUNT_ATOMIC).toBe(BigInt((await chargedLogs(event.args.id!)).length + 1));
  }, 300_000);
});

it('the customer cancels on-chain -> canceled by the customer; no charge after the next period begins', async () => {
  const payer = chain.payers[4];
  const email = 'e2e-customer-cancel@example.test';
  const { onchainId } = await subscribeByScript(payer, email);
  const sub = await waitSubscription(email);
  expect(sub).toMatchObject({ status: 'active', onchain_id: onchainId.toString() });

  const wallet = createWalletClient({ chain: { ...foundry, id: chain.chainId }, transport: http(chain.rpcUrl), account: privateKeyToAccount(payer.privateKey) });
  const hash = await wallet.writeContract({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [onchainId] });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe('success');
  expect(parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Canceled', logs: receipt.logs })).toHaveLength(1);

  await waitUntil(async () => (await getSubscription(sub.id)).status === 'canceled', STATE_TIMEOUT_MS, 250);
  const canceled = await getSubscription(sub.id);
  expect(canceled.canceled_by).toBe('customer');
  expect(canceled.canceled_at).not.toBeNull();
  await waitUntil(async () => (await fx.api.pool.query('select onchain_canceled_at from subscriptions where id = $1', [sub.id])).rows[0].onchain_canceled_at !== null, STATE_TIMEOUT_MS, 250);

  // The next period begins for the chain (its blocks' time), and the worker has had many polls since: no charge, no period invoice.
  const nextPeriodStart = Date.parse(sub.started_at) + INTERVAL_S * 1000;
  await waitUntil(async () => (await latestBlockTime()) >= nextPeriodStart + 3000, STATE_TIMEOUT_MS, 250);
  expect(await chargedLogs(onchainId)).toEqual([]);
  const invoices = await periodInvoices(sub.id);
  expect(invoices.filter((i) => i.period_index >= 1)).toEqual([]);
  expect((await getSubscription(sub.id)).status).toBe('canceled');
}, 300_000);

it('the merchant cancels over the API -> canceled by the merchant; the relayer\'s on-chain cancel is sent and confirmed', async () => {
  const payer = chain.payers[5];
  const email = 'e2e-merchant-cancel@example.test';
  const { onchainId } = await subscribeByScript(payer, email);
  const sub = await waitSubscription(email);

  const res = await api.post(`/v1/subscriptions/${sub.id}/cancel`, key());
  expect(res.status, res.raw).toBe(200);
  expect(res.body.data).toMatchObject({ id: sub.id, status: 'canceled', canceled_by: 'merchant' });
  // A second cancel: already canceled.
  const again = await api.post(`/v1/subscriptions/${sub.id}/cancel`, key());
  expect(again.status, again.raw).toBe(409);
  expect(again.body.error.code).toBe('subscription_not_active');

  // The worker's cancel job sends cancel(id) through the relayer; the watcher confirms its Canceled log.
  await waitUntil(async () => (await fx.api.pool.query('select onchain_canceled_at from subscriptions where id = $1', [sub.id])).rows[0].onchain_canceled_at !== null, STATE_TIMEOUT_MS, 250);
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Canceled', fromBlock: 0n });
  const mine = logs.filter((l) => l.args.id === onchainId);
  expect(mine).toHaveLength(1);
  expect(mine[0].args.by!.toLowerCase()).toBe(operator.address.toLowerCase());
  const after = await getSubscription(sub.id);
  expect(after).toMatchObject({ status: 'canceled', canceled_by: 'merchant' });
  expect(await chargedLogs(onchainId)).toEqual([]);
}, 300_000);
