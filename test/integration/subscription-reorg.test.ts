// Issue 26's proof "a reorg that removes a charge within the pending window -> the invoice is not
// paid on its strength", on anvil with nothing stood in: the API (the subscription checkout) and a
// real worker (the watcher with the Charged kind, the subscription jobs, the service's relayer keyed
// by RELAYER_PRIVATE_KEY_<chainId>) reaching anvil through an RPC proxy, so the test can hold the
// relayer's broadcasts back for a while.
//
// The worker charges period 1; the charge is mined and the watcher sees it pending; anvil_reorg
// takes its block (the transaction gone, not returned to the pool) while the relayer's broadcast
// of it again is held, and blocks past the confirmations are built without it: the payment is
// removed, the invoice stays open, no receipt, no invoice.paid, the subscription does not move.
// Let go, the relayer broadcasts the same signed charge again, it lands, confirms, and pays the
// period exactly once.
//
// Mining is the test's own here (automine off, no interval): the pending window is held open as
// long as the test needs, and every state is waited for, never a time.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TransactionNotFoundError, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startRpcProxy, type RpcProxy, type TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import {
  chargedLogs,
  chargeIn,
  chargeTransactions,
  deliveryCounts,
  eventCounts,
  paymentsOf,
  periodInvoice,
  pulledAtOneBlock,
  receiptEmails,
  subscribeThroughCheckout,
  type ChainSubscriber,
} from '../helpers/chain-subscriptions.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitUntil } from '../helpers/worker.js';

const INTERVAL_S = 10;
const AMOUNT_ATOMIC = 2_000_000n; // 2 USDC, 6 decimals
const STATE_MS = 90_000;
const MERCHANT = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);

let fixture: ChainFixture | undefined;
let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
let proxy: RpcProxy;
let worker: WorkerRuntime | undefined;
let linkId: string;
let miner: NodeJS.Timeout | undefined;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

/** A block a second, as a live chain makes them (anvil's automine stays on meanwhile). */
function startMiner(): void {
  miner ??= setInterval(() => {
    chain.mine(1).catch(() => undefined);
  }, 1000);
}
function stopMiner(): void {
  clearInterval(miner);
  miner = undefined;
}

beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: MERCHANT, deps: { operatorAddress: () => operator.address } });
  ({ chain, fx, sink } = fixture);
  // The fixture's worker reaches anvil directly: replaced by one on the proxy, holding the relayer's key.
  await fixture.worker.close();
  await chain.testClient.setBalance({ address: operator.address, value: 10n ** 20n });
  proxy = await startRpcProxy(chain.rpcUrl);
  const chainsFile = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'subscription-reorg-')), { rpc_urls: [proxy.url] });
  worker = await startWorker(
    fx.env.config({
      SMTP_URL: sink.url,
      CHAINS_FILE: chainsFile,
      CHAIN_POLL_INTERVAL_MS: '100',
      OUTBOX_RELAY_INTERVAL_MS: '100',
      SUBSCRIPTION_POLL_INTERVAL_MS: '200',
      RELAYER_PRIVATE_KEY_31337: operatorKey,
    }),
  );
  const product = await api.post('/v1/products', key(), { name: 'Reorg club', prices: [{ network: 'local', amount: '2', cadence: 'custom', interval_seconds: INTERVAL_S }] });
  expect(product.status, product.raw).toBe(200);
  const link = await api.post('/v1/payment-links', key(), { name: 'Reorg club', price_id: product.body.data.prices[0].id });
  expect(link.status, link.raw).toBe(200);
  linkId = link.body.data.id;
  startMiner();
}, 180_000);

afterAll(async () => {
  stopMiner();
  proxy?.rewrite(null);
  await worker?.close();
  await proxy?.close();
  await fixture?.close();
});

const cursorBlock = async (): Promise<bigint> => {
  const { rows } = await fx.api.pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].block_number) : -1n;
};

/** Whether the node knows the transaction, and in which block (null: in its pool). */
async function nodeHas(hash: Hex): Promise<{ known: boolean; blockNumber: bigint | null }> {
  try {
    const tx = await chain.publicClient.getTransaction({ hash });
    return { known: true, blockNumber: tx.blockNumber };
  } catch (err) {
    if (err instanceof TransactionNotFoundError) return { known: false, blockNumber: null };
    throw err;
  }
}

/** The subscription's period and its invoice's state, in one statement. */
async function subscriptionState(id: string): Promise<{ status: string; current_period_start: Date; next_charge_at: Date }> {
  const { rows } = await fx.api.pool.query('select status, current_period_start, next_charge_at from subscriptions where id = $1', [id]);
  return rows[0];
}

interface Hold {
  /** Broadcasts held so far (of that period's charge only, when given). */
  held(periodIndex?: number): number;
  /** Passes the held broadcasts on to the node, and every later one. */
  release(): void;
}

/**
 * Holds the relayer's broadcasts (eth_sendRawTransaction at the proxy) of the charges `which`
 * picks, unanswered until released, then passes them on to the node. The relayer's own call times
 * out meanwhile (RelayerUnavailable: retried, the row stays pending), as with a node that does not answer.
 */
function holdCharges(which: (c: { onchainId: bigint; periodIndex: number }) => boolean): Hold {
  const held: number[] = [];
  let letGo: () => void = () => undefined;
  const released = new Promise<void>((r) => (letGo = r));
  proxy.rewrite(async (req) => {
    if (req.method !== 'eth_sendRawTransaction') return undefined;
    const c = chargeIn(req.params?.[0] as Hex, chain.subscriptionManager);
    if (c === null || !which(c)) return undefined;
    held.push(c.periodIndex);
    await released;
    return undefined;
  });
  return {
    held: (periodIndex) => held.filter((k) => periodIndex === undefined || k === periodIndex).length,
    release() {
      letGo();
      proxy.rewrite(null);
    },
  };
}

const subscriptionCount = () => chain.publicClient.readContract({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'subscriptionCount' });

describe('a charge reorged out within the pending window', () => {
  it('removed, not paid on its strength (no receipt, no invoice.paid, no advance); the relayer sends the same charge again and it pays the period once', async () => {
    const payer = chain.payers[6];
    const email = 'reorg-pending@example.test';
    const balanceBefore = await chain.balanceOf(payer.address as Address);
    // Its charges wait at the proxy until the test mines by hand: on a loaded machine period 1 may
    // begin before the subscription is even read.
    const count = await subscriptionCount();
    const untilHandMining = holdCharges((c) => c.onchainId > count);
    let recorded: Hex | undefined;
    let minedIn: bigint | null = null;
    let s: ChainSubscriber;
    let before: Awaited<ReturnType<typeof subscriptionState>>;
    try {
      s = await subscribeThroughCheckout({ app: fx.api.app, pool: fx.api.pool, chain, linkId, payer, email, timeoutMs: STATE_MS });
      before = await subscriptionState(s.subscriptionId);
      expect(before.next_charge_at.getTime()).toBe(s.startedAtMs + INTERVAL_S * 1000);
      // The test mines from here: the charge waits in the pool until the test includes it.
      stopMiner();
      await chain.testClient.setAutomine(false);
    } finally {
      untilHandMining.release();
    }
    try {
      // Period 1 begins for the chain (a block at or after its start), and the worker charges it.
      const periodOneAt = s.startedAtMs + INTERVAL_S * 1000;
      await waitUntil(async () => Date.now() >= periodOneAt + 1000, STATE_MS, 100);
      await chain.mine(1);
      await waitUntil(async () => {
        const txs = await chargeTransactions(fx.api.pool, chain, s.onchainId, 1);
        recorded = txs[0]?.tx_hash as Hex | undefined;
        return recorded !== undefined && (await nodeHas(recorded)).known;
      }, STATE_MS, 100);
      const invoice = (await periodInvoice(fx.api.pool, s.subscriptionId, 1))!;
      expect(invoice.status).toBe('open');

      // Mined (by the block above when it was in the pool already); the watcher sees the charge
      // pending (blocks above the safe head count nothing yet).
      if ((await nodeHas(recorded!)).blockNumber === null) await chain.mine(1);
      minedIn = (await nodeHas(recorded!)).blockNumber;
      expect(minedIn).not.toBeNull();
      const head = await chain.publicClient.getBlockNumber();
      expect(head - minedIn!).toBeLessThan(2n); // under the chain's 2 confirmations
      expect((await chargedLogs(chain, s.onchainId)).map((l) => l.periodIndex)).toEqual([1]);
      await waitUntil(async () => (await paymentsOf(fx.api.pool, invoice.id)).some((p) => p.status === 'pending'), STATE_MS, 50);
      const [pending] = await paymentsOf(fx.api.pool, invoice.id);
      expect(pending).toMatchObject({ kind: 'charge', status: 'pending', tx_hash: recorded });

      // The relayer's broadcasts of that charge are held back, so it cannot come back before the
      // test has built the confirmations without it.
      const hold = holdCharges((c) => c.onchainId === s.onchainId);
      try {
        // The reorg takes the charge's block: an empty block of the same height, the transaction
        // gone from the chain and from the pool.
        await chain.reorg(Number(head - minedIn! + 1n));
        expect(await nodeHas(recorded!)).toEqual({ known: false, blockNumber: null });
        expect(await chargedLogs(chain, s.onchainId)).toEqual([]);
        // More than the confirmations are built on top, without it; the watcher finalises past its old block.
        await chain.mine(3);
        await waitUntil(async () => (await cursorBlock()) >= minedIn!, STATE_MS, 50);
        await waitUntil(async () => (await paymentsOf(fx.api.pool, invoice.id))[0].status === 'removed', STATE_MS, 50);

        // Not paid on its strength, nothing downstream of a payment happened.
        expect(await paymentsOf(fx.api.pool, invoice.id)).toEqual([{ ...pending, status: 'removed' }]);
        expect(await periodInvoice(fx.api.pool, s.subscriptionId, 1)).toMatchObject({ status: 'open', amount_paid_atomic: '0', attempt_count: 0, failure_code: null });
        expect(await deliveryCounts(fx.api.pool, invoice.id)).toEqual({});
        expect(receiptEmails(sink, email, invoice.code)).toEqual([]);
        const events = await eventCounts(fx.api.pool, invoice.id);
        expect(events['invoice.paid']).toBeUndefined();
        expect(events['payment.removed'] ?? 0).toBeLessThanOrEqual(1);
        expect(await subscriptionState(s.subscriptionId)).toEqual(before);
        // The relayer noticed the charge was gone and tried to send it again (held here).
        await waitUntil(async () => hold.held(1) > 0, STATE_MS, 50);
      } finally {
        hold.release();
      }
    } finally {
      await chain.testClient.setAutomine(true);
      startMiner();
    }

    // Let go: the same signed charge lands again, confirms, and pays the period once.
    await waitUntil(async () => (await periodInvoice(fx.api.pool, s.subscriptionId, 1))?.status === 'paid', STATE_MS, 250);
    const inv = (await periodInvoice(fx.api.pool, s.subscriptionId, 1))!;
    expect(inv).toMatchObject({ amount_paid_atomic: AMOUNT_ATOMIC.toString(), attempt_count: 1, failure_code: null, next_attempt_at: null });
    const period1 = (await chargedLogs(chain, s.onchainId)).filter((l) => l.periodIndex === 1);
    expect(period1).toHaveLength(1);
    const txs = await chargeTransactions(fx.api.pool, chain, s.onchainId, 1);
    expect(new Set(txs.map((t) => t.nonce)).size, JSON.stringify(txs)).toBe(1);
    expect(txs.map((t) => t.tx_hash)).toContain(period1[0].txHash.toLowerCase());
    // One payment row: the same transaction, confirmed in its new block.
    const payments = await paymentsOf(fx.api.pool, inv.id);
    expect(payments).toEqual([{ id: expect.stringMatching(/^pay_/), kind: 'charge', status: 'confirmed', outcome: 'applied', tx_hash: period1[0].txHash.toLowerCase(), reorged_out: false }]);
    expect((await eventCounts(fx.api.pool, inv.id))['invoice.paid']).toBe(1);
    await waitUntil(async () => receiptEmails(sink, email, inv.code).length >= 1, STATE_MS, 250);
    expect(receiptEmails(sink, email, inv.code)).toHaveLength(1);
    expect((await deliveryCounts(fx.api.pool, inv.id)).payment_failed).toBeUndefined();

    // Advanced once per paid period, never past_due; the customer pulled once per Charged log.
    const { rows: [sub] } = await fx.api.pool.query<{ status: string; current_period_start: Date; paid: number[] }>(
      `select s.status, s.current_period_start,
         array(select i.period_index from invoices i where i.subscription_id = s.id and i.status = 'paid' order by i.period_index) as paid
       from subscriptions s where s.id = $1`,
      [s.subscriptionId],
    );
    expect(sub.status).toBe('active');
    expect(sub.paid).toEqual(sub.paid.map((_, i) => i));
    expect(sub.current_period_start.getTime()).toBe(s.startedAtMs + sub.paid.at(-1)! * INTERVAL_S * 1000);
    expect(await eventCounts(fx.api.pool, s.subscriptionId)).toEqual({ 'subscription.created': 1 });
    const after = await pulledAtOneBlock(chain, s);
    expect(new Set(after.charged).size).toBe(after.charged.length);
    expect(balanceBefore - after.balance).toBe(AMOUNT_ATOMIC * BigInt(after.charged.length + 1));
    // Out of the next test's way.
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer' where id = $1`, [s.subscriptionId]);
  }, 300_000);
});

describe('a confirmed charge reorged out deeper than the confirmations', () => {
  it('reported and un-counted (the invoice stays paid: its receipt went out), nothing announced or advanced twice; the same charge sent again lands before the charge of the next period and counts once more', async () => {
    const payer = chain.payers[7];
    const email = 'reorg-deep@example.test';
    const balanceBefore = await chain.balanceOf(payer.address as Address);
    // Period 2's charge waits at the proxy (its period may begin while the test looks at period 1),
    // and, from the reorg on, every charge of the subscription.
    const count = await subscriptionCount();
    let holdFrom = 2;
    const hold = holdCharges((c) => c.onchainId > count && c.periodIndex >= holdFrom);
    try {
      const s = await subscribeThroughCheckout({ app: fx.api.app, pool: fx.api.pool, chain, linkId, payer, email, timeoutMs: STATE_MS });
      await deepReorgOfPeriodOne(s, email, balanceBefore, hold, () => (holdFrom = 0));
    } finally {
      hold.release();
      await chain.testClient.setAutomine(true);
      startMiner();
    }
  }, 300_000);
});

/** Period 1 charged and confirmed, then a reorg deeper than the confirmations takes its charge. */
async function deepReorgOfPeriodOne(s: ChainSubscriber, email: string, balanceBefore: bigint, hold: Hold, holdEveryCharge: () => void): Promise<void> {
  // Period 1 charged by the worker and confirmed: paid, its receipt out, the subscription advanced.
  await waitUntil(async () => (await periodInvoice(fx.api.pool, s.subscriptionId, 1))?.status === 'paid', STATE_MS, 100);
  const inv = (await periodInvoice(fx.api.pool, s.subscriptionId, 1))!;
  await waitUntil(async () => receiptEmails(sink, email, inv.code).length >= 1, STATE_MS, 100);
  const [charge] = (await chargedLogs(chain, s.onchainId)).filter((l) => l.periodIndex === 1);
  await waitUntil(async () => (await chargeTransactions(fx.api.pool, chain, s.onchainId, 1))[0]?.status === 'mined', STATE_MS, 50);
  const [confirmed] = await paymentsOf(fx.api.pool, inv.id);
  expect(confirmed).toMatchObject({ kind: 'charge', status: 'confirmed', outcome: 'applied', tx_hash: charge.txHash.toLowerCase() });
  const advanced = await subscriptionState(s.subscriptionId);
  expect(advanced.current_period_start.getTime()).toBe(s.startedAtMs + INTERVAL_S * 1000);

  // Period 2 begins and its charge is signed, recorded (the next nonce) and held: the charge of
  // period 1, sent again after the reorg, must still land first.
  await waitUntil(async () => hold.held(2) >= 1 && (await chargeTransactions(fx.api.pool, chain, s.onchainId, 2)).length === 1, STATE_MS, 100);
  stopMiner();
  await chain.testClient.setAutomine(false);
  holdEveryCharge();
  const heldBefore = hold.held(1);
  const minedIn = (await nodeHas(charge.txHash)).blockNumber!;
  const head = await chain.publicClient.getBlockNumber();
  expect(head - minedIn).toBeGreaterThanOrEqual(2n); // confirmed: at least the chain's 2 confirmations on top
  await chain.reorg(Number(head - minedIn + 1n));
  expect(await chargedLogs(chain, s.onchainId)).toEqual([]);
  await chain.mine(3);
  await waitUntil(async () => (await paymentsOf(fx.api.pool, inv.id))[0].reorged_out, STATE_MS, 50);

  // Reported and un-counted; the invoice stays paid (the merchant decides), nothing announced
  // again, the subscription neither moved back nor on.
  expect(await paymentsOf(fx.api.pool, inv.id)).toEqual([{ ...confirmed, status: 'removed', outcome: null, reorged_out: true }]);
  expect(await periodInvoice(fx.api.pool, s.subscriptionId, 1)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });
  expect((await eventCounts(fx.api.pool, confirmed.id))['payment.reorged_out']).toBe(1);
  expect((await eventCounts(fx.api.pool, inv.id))['invoice.paid']).toBe(1);
  expect(await subscriptionState(s.subscriptionId)).toEqual(advanced);
  // The relayer saw its charge gone from the chain and sends it again (held here).
  await waitUntil(async () => hold.held(1) > heldBefore, STATE_MS, 50);
  hold.release();
  await chain.testClient.setAutomine(true);
  startMiner();

  // The same signed charge lands again, before any later period's, and counts once more.
  await waitUntil(async () => (await paymentsOf(fx.api.pool, inv.id))[0].status === 'confirmed', STATE_MS, 100);
  expect(await paymentsOf(fx.api.pool, inv.id)).toEqual([confirmed]);
  expect(await periodInvoice(fx.api.pool, s.subscriptionId, 1)).toMatchObject({ status: 'paid', amount_paid_atomic: AMOUNT_ATOMIC.toString(), attempt_count: 1 });
  expect((await chargedLogs(chain, s.onchainId)).filter((l) => l.periodIndex === 1).map((l) => l.txHash)).toEqual([charge.txHash]);
  expect(await chargeTransactions(fx.api.pool, chain, s.onchainId, 1)).toMatchObject([{ tx_hash: charge.txHash.toLowerCase() }]);
  expect((await eventCounts(fx.api.pool, inv.id))['invoice.paid']).toBe(1);
  expect(receiptEmails(sink, email, inv.code)).toHaveLength(1);
  expect(await deliveryCounts(fx.api.pool, inv.id)).toEqual({ receipt: 1 });
  // Period 2 charged after it, each period once; the customer pulled once per Charged log.
  await waitUntil(async () => (await periodInvoice(fx.api.pool, s.subscriptionId, 2))?.status === 'paid', STATE_MS, 100);
  const after = await pulledAtOneBlock(chain, s);
  expect(after.charged).toEqual(after.charged.map((_, i) => i + 1));
  expect(balanceBefore - after.balance).toBe(AMOUNT_ATOMIC * BigInt(after.charged.length + 1));
  await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer' where id = $1`, [s.subscriptionId]);
}
