// Adversarial tests of recurring payments (issue 26) on anvil with nothing stood in: the API, a real
// worker (the watcher, the subscription jobs, the service's relayer keyed by
// RELAYER_PRIVATE_KEY_<chainId>), real Postgres. Each test attempts something a payer, a tenant or a
// flaky node would try and asserts the service refuses it or does not count it.
//
// The sandbox price's interval is 10 s (the sandbox minimum). States are waited for with generous
// timeouts (the machine is shared), never a time.
import { createWalletClient, http, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import type { WellKnownAccount } from '../../src/devchain/accounts.js';
import { sendSubscription } from '../../src/devchain/subscribe-command.js';
import type { SubscriptionCheckoutAnswer } from '../../src/http/schemas/payment-page.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';
import { subscriptionCheckoutAnswer, recurringLink, keepMining } from '../helpers/subscriptions.js';

const INTERVAL_S = 10;
const STATE_TIMEOUT_MS = 90_000;
const MERCHANT = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);

let fixture: ChainFixture | undefined;
let chain: TestChain;
let fx: ApiFixture;
let linkId: string;
let miner: NodeJS.Timeout | undefined;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

/** A live chain makes a block every second or so; anvil only when a transaction comes. */
function startMiner(): void {
  if (miner) return;
  miner = keepMining(chain);
}
function stopMiner(): void {
  clearInterval(miner);
  miner = undefined;
}

beforeAll(async () => {
  fixture = await startChainFixture({
    settlementAddress: MERCHANT,
    listen: true,
    env: {
      RELAYER_PRIVATE_KEY_31337: operatorKey,
      SUBSCRIPTION_POLL_INTERVAL_MS: '200',
      // Long enough that no retry of its own comes while a test holds the subscription.
      DUNNING_SCHEDULE: 'PT10M,PT20M',
    },
  });
  ({ chain, fx } = fixture);
  await chain.testClient.setBalance({ address: operator.address, value: 10n ** 20n });
  linkId = await recurringLink(api, key(), INTERVAL_S);
}, 180_000);

afterAll(async () => {
  stopMiner();
  await fixture?.close();
});

// --- helpers ---

/** The page script's flow without the page: the checkout over HTTP, then approve and subscribe(terms) from `payer`. */
async function subscribeByScript(payer: WellKnownAccount, email: string): Promise<{ onchainId: bigint; answer: SubscriptionCheckoutAnswer }> {
  const answer = await subscriptionCheckoutAnswer(fx.api.app, linkId, email);
  const sent = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
  return { onchainId: sent.onchainId, answer };
}

async function subscriptionOf(email: string): Promise<JsonBody | null> {
  const res = await api.get(`/v1/subscriptions?customer_email=${encodeURIComponent(email)}`, key());
  expect(res.status, res.raw).toBe(200);
  return res.body.data[0] ?? null;
}

async function waitSubscription(email: string): Promise<JsonBody> {
  let sub: JsonBody | null = null;
  await waitUntil(async () => (sub = await subscriptionOf(email)) !== null, STATE_TIMEOUT_MS, 250);
  return sub!;
}

interface PeriodInvoice {
  id: string;
  status: string;
  attempt_count: number;
  failure_code: string | null;
  payment_reference: Hex;
  amount_atomic: string;
  fee_atomic: string;
  amount_paid_atomic: string;
  charge_sent_at: Date | null;
}

async function periodInvoice(subscriptionId: string, k: number): Promise<PeriodInvoice | undefined> {
  const { rows } = await fx.api.pool.query<PeriodInvoice>(
    `select id, status, attempt_count, failure_code, payment_reference, amount_atomic::text, fee_atomic::text, amount_paid_atomic::text, charge_sent_at
     from invoices where subscription_id = $1 and period_index = $2`,
    [subscriptionId, k],
  );
  return rows[0];
}

const approveManager = async (payer: Address, amount: bigint) => {
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  const receipt = await chain.publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({ account: payer, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, amount] }),
  });
  expect(receipt.status).toBe('success');
};

async function chargedPeriods(onchainId: bigint): Promise<number[]> {
  const logs = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id: onchainId }, fromBlock: 0n });
  return logs.map((l) => l.args.periodIndex!);
}

async function subscriptionWork(outcome: string): Promise<number> {
  const metric = fixture!.worker.metrics.registry.getSingleMetric('subscription_work_total');
  const values = metric ? (await metric.get()).values : [];
  return values.filter((v) => v.labels.job === 'subscriptions.charge' && v.labels.outcome === outcome).reduce((a, v) => a + v.value, 0);
}

describe('a payer paying a period by wallet while the relayer would charge it', () => {
  it('a payment of the period invoice seen but not yet confirmed: no charge is sent for that period; the wallet payment pays it, the customer pays once', async () => {
    startMiner();
    const payer = chain.payers[1];
    const email = `race-${Math.random().toString(36).slice(2)}@example.test`;
    const { onchainId } = await subscribeByScript(payer, email);
    const sub = await waitSubscription(email);
    // Period 1 will fail: the allowance is spent.
    await approveManager(payer.address, 0n);
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.failure_code === 'insufficient_allowance', STATE_TIMEOUT_MS, 250);
    const inv = (await periodInvoice(sub.id, 1))!;
    expect(inv).toMatchObject({ status: 'open', attempt_count: 1, charge_sent_at: null });

    // The failed-attempt email tells the customer they may pay the invoice by wallet: they do, and
    // approve the contract again. The worker is held off meanwhile (its next attempt is minutes
    // away anyway), and no block is mined after, so the wallet payment stays below its confirmations.
    await fx.api.pool.query(`update subscriptions set next_work_at = now() + interval '1 hour' where id = $1`, [sub.id]);
    stopMiner();
    const fee = BigInt(inv.fee_atomic);
    const paid = await chain.payWithReference({ from: payer.address, to: MERCHANT, amountAtomic: BigInt(inv.amount_atomic) - fee, feeAtomic: fee, reference: inv.payment_reference });
    await approveManager(payer.address, 10n ** 12n);
    await waitUntil(async () => (await fx.api.pool.query(`select 1 from payments where tx_hash = $1 and status = 'pending' and invoice_id = $2`, [paid.txHash, inv.id])).rowCount === 1, STATE_TIMEOUT_MS, 250);

    // The worker looks at the period now: the charge would succeed on-chain, but the customer's own
    // payment of the period is on its way.
    const pendingBefore = await subscriptionWork('payment_pending');
    await fx.api.pool.query(`update subscriptions set next_work_at = now() where id = $1`, [sub.id]);
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.charge_sent_at !== null || (await subscriptionWork('payment_pending')) > pendingBefore, STATE_TIMEOUT_MS, 100);
    expect((await periodInvoice(sub.id, 1))!.charge_sent_at).toBeNull();

    // Confirmed: the wallet payment pays period 1, once; the chain holds no charge of period 1.
    startMiner();
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.status === 'paid', STATE_TIMEOUT_MS, 250);
    expect((await periodInvoice(sub.id, 1))!.amount_paid_atomic).toBe(inv.amount_atomic);
    expect(await chargedPeriods(onchainId)).not.toContain(1);
    const { rows: payments } = await fx.api.pool.query<{ kind: string; outcome: string }>(`select kind, outcome from payments where invoice_id = $1 and status = 'confirmed'`, [inv.id]);
    expect(payments).toEqual([{ kind: 'proxy', outcome: 'applied' }]);
    stopMiner();
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer', onchain_canceled_at = now() where id = $1`, [sub.id]);
  }, 240_000);
});

describe('a stranger sending dust to a period invoice to stall its charge', () => {
  it('a pending payment that would not settle the period holds nothing up: the charge is sent and pays it', async () => {
    startMiner();
    const payer = chain.payers[5];
    const stranger = chain.payers[6];
    const email = `dust-${Math.random().toString(36).slice(2)}@example.test`;
    const { onchainId } = await subscribeByScript(payer, email);
    const sub = await waitSubscription(email);
    await approveManager(payer.address, 0n);
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.failure_code === 'insufficient_allowance', STATE_TIMEOUT_MS, 250);
    const inv = (await periodInvoice(sub.id, 1))!;
    await fx.api.pool.query(`update subscriptions set next_work_at = now() + interval '1 hour' where id = $1`, [sub.id]);
    await approveManager(payer.address, 10n ** 12n);
    stopMiner();
    // One atomic unit to the invoice's reference, below its confirmations when the worker looks.
    const dust = await chain.payWithReference({ from: stranger.address, to: MERCHANT, amountAtomic: 1n, feeAtomic: 0n, reference: inv.payment_reference });
    await waitUntil(async () => (await fx.api.pool.query(`select 1 from payments where tx_hash = $1 and status = 'pending' and invoice_id = $2`, [dust.txHash, inv.id])).rowCount === 1, STATE_TIMEOUT_MS, 250);

    await fx.api.pool.query(`update subscriptions set next_work_at = now() where id = $1`, [sub.id]);
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.charge_sent_at != null, STATE_TIMEOUT_MS, 100);
    startMiner();
    await waitUntil(async () => (await periodInvoice(sub.id, 1))?.status === 'paid', STATE_TIMEOUT_MS, 250);
    expect(await chargedPeriods(onchainId)).toEqual([1]);
    stopMiner();
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer', onchain_canceled_at = now() where id = $1`, [sub.id]);
  }, 240_000);
});

describe('a subscribe call against a checkout that is no longer payable', () => {
  it('the merchant voided the checkout invoice: the subscribe is recorded against it as invoice_void, and no subscription is made (nothing will ever be charged)', async () => {
    startMiner();
    const payer = chain.payers[2];
    const email = `void-${Math.random().toString(36).slice(2)}@example.test`;
    const answer = await subscriptionCheckoutAnswer(fx.api.app, linkId, email);
    const { rows } = await fx.api.pool.query<{ invoice_id: string }>('select invoice_id from subscription_checkouts where checkout_reference = $1', [answer.terms.checkout_reference.toLowerCase()]);
    const invoiceId = rows[0].invoice_id;
    const voided = await api.post(`/v1/invoices/${invoiceId}/void`, key());
    expect(voided.status, voided.raw).toBe(200);

    // The wallet still holds the terms and subscribes with them, exactly.
    const sent = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
    await waitUntil(async () => (await fx.api.pool.query(`select 1 from payments where tx_hash = $1 and status = 'confirmed'`, [sent.txHash])).rowCount === 1, STATE_TIMEOUT_MS, 250);
    const { rows: payments } = await fx.api.pool.query<{ kind: string; invoice_id: string | null; outcome: string }>(`select kind, invoice_id, outcome from payments where tx_hash = $1`, [sent.txHash]);
    expect(payments).toEqual([{ kind: 'subscribe', invoice_id: invoiceId, outcome: 'invoice_void' }]);
    expect(await subscriptionOf(email)).toBeNull();
    const { rows: checkout } = await fx.api.pool.query<{ subscription_id: string | null }>('select subscription_id from subscription_checkouts where invoice_id = $1', [invoiceId]);
    expect(checkout).toEqual([{ subscription_id: null }]);
    expect((await api.get(`/v1/invoices/${invoiceId}`, key())).body.data).toMatchObject({ status: 'void', amount_paid_atomic: '0' });
    stopMiner();
  }, 240_000);
});

describe('a node whose Subscribed log a reorg takes away', () => {
  it('seen pending, then reorged out before its confirmations: the payment is removed, no subscription is made, the checkout invoice stays open', async () => {
    stopMiner();
    const payer = chain.payers[3];
    const email = `reorg-${Math.random().toString(36).slice(2)}@example.test`;
    const answer = await subscriptionCheckoutAnswer(fx.api.app, linkId, email);
    const balanceBefore = await chain.balanceOf(payer.address);
    const sent = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
    const pendingRow = async () => (await fx.api.pool.query<{ status: string }>(`select status from payments where tx_hash = $1`, [sent.txHash])).rows[0]?.status;
    await waitUntil(async () => (await pendingRow()) === 'pending', STATE_TIMEOUT_MS, 100);

    // The blocks of the approve and the subscribe are replaced by empty ones: the call never happened.
    const depth = Number((await chain.publicClient.getBlockNumber()) - (sent.approveTxHash ? sent.blockNumber - 1n : sent.blockNumber)) + 1;
    await chain.reorg(depth);
    expect(await chain.balanceOf(payer.address)).toBe(balanceBefore);
    startMiner();
    await waitUntil(async () => (await pendingRow()) === 'removed', STATE_TIMEOUT_MS, 250);
    // Well past the block it was in, with its confirmations: still nothing made of it.
    await waitUntil(
      async () => (await fx.api.pool.query(`select 1 from chain_cursors where chain_id = $1 and block_number >= $2`, [chain.chainId, (sent.blockNumber + 3n).toString()])).rowCount === 1,
      STATE_TIMEOUT_MS,
      250,
    );
    expect(await subscriptionOf(email)).toBeNull();
    const { rows } = await fx.api.pool.query<{ subscription_id: string | null; status: string; amount_paid_atomic: string }>(
      `select k.subscription_id, i.status, i.amount_paid_atomic::text from subscription_checkouts k join invoices i on i.id = k.invoice_id where k.checkout_reference = $1`,
      [answer.terms.checkout_reference.toLowerCase()],
    );
    expect(rows).toEqual([{ subscription_id: null, status: 'open', amount_paid_atomic: '0' }]);
    expect(await pendingRow()).toBe('removed');
    stopMiner();
  }, 240_000);
});
