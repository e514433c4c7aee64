// Issue 26's proof "the worker SIGKILLed right after broadcasting a charge -> exactly one charge and
// one paid invoice per period", on anvil with real worker processes and nothing stood in: the API
// (the subscription checkout), and `main/cli.ts worker` children that are the only workers (the
// watcher, the subscription jobs, the receipts, and the service's relayer keyed by
// RELAYER_PRIVATE_KEY_<chainId>). The workers reach anvil through an RPC proxy that lets the test see
// the relayer's eth_sendRawTransaction of the period's charge and act at that very moment:
//
// - killed as the node accepts the charge (before the worker hears the answer);
// - killed on the worker's own "relayer transaction sent" line;
// - killed between the record and the broadcast (the broadcast held at the proxy, never reaching
//   the node): the next worker must broadcast that very transaction (same nonce, same hash).
//
// Then a new worker process starts, and: one Charged log for the period, one payment, the period
// invoice paid once with no failed attempt counted, one receipt, the subscription advanced once per
// paid period, and the customer pulled exactly once per Charged log.
//
// The sandbox price's interval is 10 s (its minimum). Every state is waited for, never a time.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { keccak256, TransactionNotFoundError, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import type { WellKnownAccount } from '../../src/devchain/accounts.js';
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
import { spawnWorker, waitUntil, workerProcessEnv, type WorkerProcess } from '../helpers/worker.js';
import { recurringLink, keepMining } from '../helpers/subscriptions.js';

const INTERVAL_S = 10;
const AMOUNT_ATOMIC = 2_000_000n; // 2 USDC, 6 decimals
// A state a worker process reaches (started through tsx on a loaded machine): generous.
const STATE_MS = 120_000;
const MERCHANT = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);

let fixture: ChainFixture | undefined;
let chain: TestChain;
let fx: ApiFixture;
let sink: SmtpSink;
let proxy: RpcProxy;
let workersChainsFile: string;
let linkId: string;
let miner: NodeJS.Timeout | undefined;
const cleanups: (() => Promise<unknown>)[] = [];
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

beforeAll(async () => {
  fixture = await startChainFixture({
    settlementAddress: MERCHANT,
    // The API names the relayer's address as the operator of new checkouts; the key itself is only
    // the worker processes'.
    deps: { operatorAddress: () => operator.address },
  });
  ({ chain, fx, sink } = fixture);
  // The fixture's in-process worker goes: the worker processes below are the only ones, so a
  // SIGKILL stops everything the service does on the chain (watching included) until the next starts.
  await fixture.worker.close();
  await chain.testClient.setBalance({ address: operator.address, value: 10n ** 20n });
  proxy = await startRpcProxy(chain.rpcUrl);
  workersChainsFile = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'subscription-crash-')), { rpc_urls: [proxy.url] });
  linkId = await recurringLink(api, key(), INTERVAL_S, 'Crash club');
  // A live chain makes a block every second or so; anvil only when a transaction comes. Without
  // blocks nothing confirms and a period never begins for the chain.
  miner = keepMining(chain);
}, 180_000);

afterEach(async () => {
  proxy?.rewrite(null);
  for (const stop of cleanups.splice(0).reverse()) await stop().catch(() => undefined);
});

afterAll(async () => {
  clearInterval(miner);
  await proxy?.close();
  // The in-process worker was closed above; closing it again fails quietly in the fixture.
  await fixture?.close();
});

/** A worker process on the proxy, holding the relayer's key; killed after the test if still running. */
async function startWorkerProcess(extra: Record<string, string> = {}): Promise<WorkerProcess> {
  const p = spawnWorker(
    workerProcessEnv(fx.env.config({ SMTP_URL: sink.url }), {
      CHAINS_FILE: workersChainsFile,
      CHAIN_POLL_INTERVAL_MS: '100',
      OUTBOX_RELAY_INTERVAL_MS: '100',
      SUBSCRIPTION_POLL_INTERVAL_MS: '200',
      RELAYER_PRIVATE_KEY_31337: operatorKey,
      // Never "stuck" here, however slowly the next worker starts: the recorded charge must go out
      // as it was signed (a replacement at higher fees is relayer.test.ts's).
      RELAYER_STUCK_BLOCKS: '10000',
      ...extra,
    }),
  );
  cleanups.push(() => p.stop('SIGKILL'));
  await p.waitForLine((l) => l.msg === 'worker started', STATE_MS);
  return p;
}

type KillAt = 'node accepted the charge' | 'the worker logged it sent' | 'recorded, never broadcast';

interface Killed {
  /** The signed charge the killed worker recorded. */
  recorded: Hex;
  /** The subscription it charged (the contract's id). */
  onchainId: bigint;
}

/**
 * Arms the proxy for the first charge of period 1 of a subscription newer than `afterId` and kills
 * `victim` with SIGKILL at `killAt`; resolves once it is dead, the proxy passing everything again.
 * Armed before the subscription exists: its period 1 may begin before a loaded machine has read it.
 */
async function killAtCharge(victim: WorkerProcess, afterId: bigint, killAt: KillAt): Promise<Killed> {
  let fired = false;
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  let seen: (charge: { raw: Hex; onchainId: bigint }) => void = () => undefined;
  const charge = new Promise<{ raw: Hex; onchainId: bigint }>((r) => (seen = r));
  proxy.rewrite(async (req, real) => {
    if (fired || req.method !== 'eth_sendRawTransaction') return undefined;
    const raw = req.params?.[0] as Hex;
    const c = chargeIn(raw, chain.subscriptionManager);
    if (c === null || c.onchainId <= afterId || c.periodIndex !== 1) return undefined;
    fired = true;
    seen({ raw, onchainId: c.onchainId });
    if (killAt === 'node accepted the charge') {
      const answer = await real();
      // The node holds the transaction; the worker dies before it hears so.
      victim.child.kill('SIGKILL');
      return answer;
    }
    if (killAt === 'recorded, never broadcast') {
      // Never reaches the node; answered (to a dead process) only once the test lets go.
      await held;
      return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32000, message: 'held by the test' } };
    }
    return undefined;
  });
  try {
    const { raw, onchainId } = await Promise.race([charge, victim.exited.then(() => Promise.reject(new Error('the worker exited before it sent the charge')))]);
    const recorded = keccak256(raw);
    if (killAt === 'the worker logged it sent') {
      await victim.waitForLine((l) => l.msg === 'relayer transaction sent' && l.tx_hash === recorded, STATE_MS);
      victim.child.kill('SIGKILL');
    }
    if (killAt === 'recorded, never broadcast') {
      // The relayer records before it broadcasts: the row is there while the broadcast is held.
      expect((await chargeTransactions(fx.api.pool, chain, onchainId, 1)).map((r) => r.tx_hash)).toEqual([recorded]);
      victim.child.kill('SIGKILL');
    }
    await victim.exited;
    expect(victim.child.signalCode).toBe('SIGKILL');
    return { recorded, onchainId };
  } finally {
    release();
    proxy.rewrite(null);
  }
}

/** Takes the subscription out of later tests' way (their workers would bill it). */
async function retire(s: ChainSubscriber): Promise<void> {
  await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer', onchain_canceled_at = now() where id = $1 and status in ('active', 'past_due')`, [s.subscriptionId]);
}

/**
 * `stuck`: the next worker starts only once the recorded charge is RELAYER_STUCK_BLOCKS (12) blocks
 * old, so it replaces it (same nonce, higher fees) rather than broadcasting it as it was.
 */
async function crashRightAfterCharge(payer: WellKnownAccount, email: string, killAt: KillAt, opts: { stuck?: boolean } = {}): Promise<void> {
  const victim = await startWorkerProcess();
  const count = await chain.publicClient.readContract({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'subscriptionCount' });
  const killed = killAtCharge(victim, count, killAt);
  killed.catch(() => undefined); // awaited below; a failure before then is not unhandled
  const balanceBefore = await chain.balanceOf(payer.address as Address);
  const s = await subscribeThroughCheckout({ app: fx.api.app, pool: fx.api.pool, chain, linkId, payer, email, timeoutMs: STATE_MS });
  const { recorded, onchainId } = await killed;
  expect(onchainId).toBe(s.onchainId);
  const knownToNode = await chain.publicClient.getTransaction({ hash: recorded }).then(
    () => true,
    (err: unknown) => {
      if (err instanceof TransactionNotFoundError) return false;
      throw err;
    },
  );
  expect(knownToNode).toBe(killAt !== 'recorded, never broadcast');

  if (opts.stuck) {
    const { rows } = await fx.api.pool.query<{ sent_at_block: string }>('select sent_at_block::text from relayer_transactions where tx_hash = $1', [recorded.toLowerCase()]);
    await waitUntil(async () => (await chain.publicClient.getBlockNumber()) >= BigInt(rows[0].sent_at_block) + 12n, STATE_MS, 250);
  }
  await startWorkerProcess(opts.stuck ? { RELAYER_STUCK_BLOCKS: '12' } : {});
  await waitUntil(async () => (await periodInvoice(fx.api.pool, s.subscriptionId, 1))?.status === 'paid', STATE_MS, 250);

  // One Charged log for period 1, by the very transaction the killed worker recorded (or, stuck, its
  // replacement: same nonce): the relayer never signed a second charge of the period.
  const period1Logs = (await chargedLogs(chain, s.onchainId)).filter((l) => l.periodIndex === 1);
  expect(period1Logs).toHaveLength(1);
  // The relayer's rows settle on its own timer (the next worker's upkeep), not with the watcher
  // that paid the invoice: waited for, as their final state.
  await waitUntil(async () => (await chargeTransactions(fx.api.pool, chain, s.onchainId, 1)).every((t) => t.status !== 'pending' && t.status !== 'replaced'), STATE_MS, 250);
  const txs = await chargeTransactions(fx.api.pool, chain, s.onchainId, 1);
  if (opts.stuck) {
    expect(txs, JSON.stringify(txs)).toMatchObject([
      { tx_hash: recorded.toLowerCase(), status: 'dropped' },
      { tx_hash: period1Logs[0].txHash.toLowerCase(), status: 'mined', nonce: txs[0].nonce },
    ]);
  } else {
    expect(period1Logs[0].txHash.toLowerCase()).toBe(recorded.toLowerCase());
    expect(txs, JSON.stringify(txs)).toMatchObject([{ tx_hash: recorded.toLowerCase(), status: 'mined' }]);
  }

  // The period invoice: paid once by that one charge, no failed attempt counted against the customer.
  const inv = (await periodInvoice(fx.api.pool, s.subscriptionId, 1))!;
  // attempt_count counts the attempt that paid it: one, whatever the crash (docs/subscriptions.md).
  expect(inv).toMatchObject({ status: 'paid', amount_paid_atomic: AMOUNT_ATOMIC.toString(), attempt_count: 1, failure_code: null, next_attempt_at: null });
  expect(period1Logs[0].paymentReference).toBe(inv.payment_reference);
  expect(await paymentsOf(fx.api.pool, inv.id)).toEqual([
    { id: expect.stringMatching(/^pay_/), kind: 'charge', status: 'confirmed', outcome: 'applied', tx_hash: period1Logs[0].txHash.toLowerCase(), reorged_out: false },
  ]);
  const events = await eventCounts(fx.api.pool, inv.id);
  expect(events['invoice.paid']).toBe(1);
  expect(events['invoice.payment_failed']).toBeUndefined();
  // One receipt, emailed once.
  await waitUntil(async () => receiptEmails(sink, email, inv.code).length >= 1, STATE_MS, 250);
  // The worker marks the delivery sent once the SMTP server accepted it: after the sink has it.
  const receiptRows = async () =>
    (await fx.api.pool.query<{ status: string }>(`select status from deliveries where invoice_id = $1 and kind = 'receipt'`, [inv.id])).rows;
  await waitUntil(async () => (await receiptRows()).every((r) => r.status !== 'pending'), STATE_MS, 100);
  expect(await receiptRows()).toEqual([{ status: 'sent' }]);
  expect(receiptEmails(sink, email, inv.code)).toHaveLength(1);
  expect(await deliveryCounts(fx.api.pool, inv.id)).toEqual({ receipt: 1 });

  // The subscription: active, never past_due, advanced once per paid period (read in one statement).
  const { rows: [sub] } = await fx.api.pool.query<{ status: string; current_period_start: Date; next_charge_at: Date; paid: number[] }>(
    `select s.status, s.current_period_start, s.next_charge_at,
       array(select i.period_index from invoices i where i.subscription_id = s.id and i.status = 'paid' order by i.period_index) as paid
     from subscriptions s where s.id = $1`,
    [s.subscriptionId],
  );
  expect(sub.status).toBe('active');
  expect(sub.paid).toEqual(sub.paid.map((_, i) => i));
  const last = sub.paid.at(-1)!;
  expect(sub.current_period_start.getTime()).toBe(s.startedAtMs + last * INTERVAL_S * 1000);
  expect(sub.next_charge_at.getTime()).toBe(s.startedAtMs + (last + 1) * INTERVAL_S * 1000);
  expect(await eventCounts(fx.api.pool, s.subscriptionId)).toEqual({ 'subscription.created': 1 });

  // The customer was pulled exactly once per Charged log (period 0 by the subscribe call), each period at most once.
  const after = await pulledAtOneBlock(chain, s);
  expect(new Set(after.charged).size).toBe(after.charged.length);
  expect(balanceBefore - after.balance).toBe(AMOUNT_ATOMIC * BigInt(after.charged.length + 1));
  await retire(s);
}

describe('the worker SIGKILLed at a charge: one charge and one paid invoice per period', () => {
  it('killed as the node accepts the charge, before the worker hears the answer', async () => {
    await crashRightAfterCharge(chain.payers[3], 'crash-accepted@example.test', 'node accepted the charge');
  }, 400_000);

  it('killed on its own "relayer transaction sent" line', async () => {
    await crashRightAfterCharge(chain.payers[4], 'crash-logged@example.test', 'the worker logged it sent');
  }, 400_000);

  it('killed between the record and the broadcast: the next worker broadcasts the recorded charge as it was signed', async () => {
    await crashRightAfterCharge(chain.payers[5], 'crash-unsent@example.test', 'recorded, never broadcast');
  }, 400_000);

  it('killed between the record and the broadcast, the next worker starting 12 blocks later: the recorded charge is replaced (same nonce, higher fees) and lands once', async () => {
    await crashRightAfterCharge(chain.payers[6], 'crash-stuck@example.test', 'recorded, never broadcast', { stuck: true });
  }, 400_000);
});
