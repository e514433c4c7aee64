// Adversarial tests of recurring payments (issue 26): the merchant cancels a subscription (or voids
// its period invoice) over the API while the worker holds that period in a charge batch. On anvil
// with the API, a real worker (the watcher, the subscription jobs) and the service's own relayer
// (createRelayer, unchanged).
//
// The charge job (jobs/subscriptions-charge.ts chargeBatch) claims the subscription, reads its
// period invoice and decides to charge it (bill), optionally sleeps until the due time (the "one
// run ahead" claim), simulates the charge through the relayer (an eth_estimateGas, which also waits
// for the chain's block that begins the period), and sends it. Nothing re-reads the subscription
// or the invoice between the decision and the send: a cancel (or a void) committed by the API in
// between does not stop the charge, and the customer is pulled for a subscription the API already
// answered `canceled` (or for a period the merchant waived).
//
// Here the node is slow to answer the simulation (the wrapper holds the relayer's own answer until
// the API call returned), which widens the window deterministically; the claim-ahead sleep and the
// relayer's wait for the period's block open the same window in production. The on-chain cancel is
// sent by a separate job on its own scheduler tick: its send is held (as a busy cancel job would
// be) until the charge job is done with the period, which is the order the race gives whenever the
// cancel job comes second. The rule: once the API said `canceled` (or `void`), the service sends no
// charge for it.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRelayer } from '../../src/chain/relayer.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { sendSubscription } from '../../src/devchain/subscribe-command.js';
import { createLogger } from '../../src/log.js';
import type { SubscriptionRelayer } from '../../src/queue/job-context.js';
import { readRelayerKeys } from '../../src/runtime/relayer-runtime.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';
import { subscriptionCheckoutAnswer, recurringLink, keepMining } from '../helpers/subscriptions.js';

const INTERVAL_S = 10;
const STATE_TIMEOUT_MS = 90_000;
const MERCHANT = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);

let fixture: ChainFixture | undefined;
let chain: TestChain;
let fx: ApiFixture;
let linkId: string;
let miner: NodeJS.Timeout | undefined;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

/** Every charge the worker asked the relayer to send: which subscription and period, and when. */
const chargeSends: { onchainId: bigint; periodIndex: number; at: number }[] = [];
/** The on-chain cancel's send waits for this (released in afterAll at the latest). */
let releaseCancels: () => void = () => undefined;
/** A slow node: the simulation of period 1 of one subscription answers only once released. */
let simulationGate: { onchainId: bigint; reached: boolean; held: Promise<void>; release: () => void } | null = null;
function holdSimulation(onchainId: bigint): NonNullable<typeof simulationGate> {
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => {
    release = r;
  });
  simulationGate = { onchainId, reached: false, held, release };
  return simulationGate;
}
const cancelsHeld = new Promise<void>((resolve) => {
  releaseCancels = resolve;
});

beforeAll(async () => {
  fixture = await startChainFixture({
    settlementAddress: MERCHANT,
    listen: true,
    env: {
      RELAYER_PRIVATE_KEY_31337: operatorKey,
      SUBSCRIPTION_POLL_INTERVAL_MS: '200',
      DUNNING_SCHEDULE: 'PT10M',
    },
    worker: ({ fx: f, config }) => {
      const real = createRelayer({
        pool: f.api.pool,
        chains: config.chains,
        keys: readRelayerKeys(config),
        stuckBlocks: config.relayerStuckBlocks,
        minBalance: config.relayerMinBalance,
        log: createLogger('silent'),
      });
      const relayer: SubscriptionRelayer = {
        operatorAddress: (chainId) => real.operatorAddress(chainId),
        simulateCharge: async (chainId, target) => {
          const verdict = await real.simulateCharge(chainId, target);
          const gate = simulationGate;
          if (gate && gate.onchainId === target.onchainId && target.periodIndex === 1) {
            gate.reached = true;
            await gate.held;
          }
          return verdict;
        },
        sendCharge: (chainId, target) => {
          chargeSends.push({ onchainId: target.onchainId, periodIndex: target.periodIndex, at: Date.now() });
          return real.sendCharge(chainId, target);
        },
        sendCancel: async (chainId, target) => {
          await cancelsHeld;
          return real.sendCancel(chainId, target);
        },
      };
      return { relayer };
    },
  });
  ({ chain, fx } = fixture);
  await chain.testClient.setBalance({ address: operator.address, value: 10n ** 20n });
  linkId = await recurringLink(api, key(), INTERVAL_S);
  // Blocks keep coming, as on a live chain: periods begin for the chain, payments confirm.
  miner = keepMining(chain);
}, 180_000);

afterAll(async () => {
  releaseCancels();
  simulationGate?.release();
  clearInterval(miner);
  await fixture?.close();
});

async function chargeRuns(): Promise<number> {
  const values = (await fixture!.worker.metrics.jobDuration.get()).values;
  return values.filter((v) => v.labels.name === 'subscriptions.charge' && (v.metricName ?? '').endsWith('_count')).reduce((n, v) => n + v.value, 0);
}

/** Subscribes `payer` through the link's checkout and waits for the subscription; period 1's simulation will be held. */
async function subscribeHeld(payer: (typeof chain.payers)[number], tag: string): Promise<{ sub: JsonBody; onchainId: bigint; gate: NonNullable<typeof simulationGate> }> {
  const email = `${tag}-${Math.random().toString(36).slice(2)}@example.test`;
  const answer = await subscriptionCheckoutAnswer(fx.api.app, linkId, email);
  const { onchainId } = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
  // Period 1 begins INTERVAL_S after the subscribe: the gate is set long before.
  const gate = holdSimulation(onchainId);
  let sub: JsonBody | undefined;
  await waitUntil(async () => (sub = (await api.get(`/v1/subscriptions?customer_email=${encodeURIComponent(email)}`, key())).body.data[0]) !== undefined, STATE_TIMEOUT_MS, 100);
  return { sub: sub!, onchainId, gate };
}

/** Waits until the charge job is done with the held period: it asked for a send, or it completed two more runs. */
async function chargeJobDone(onchainId: bigint): Promise<void> {
  const runs = await chargeRuns();
  await waitUntil(async () => chargeSends.some((c) => c.onchainId === onchainId) || (await chargeRuns()) >= runs + 2, STATE_TIMEOUT_MS, 100);
  // Whatever it sent is on the chain and settled (the relayer's nonce order puts it before any later cancel).
  await waitUntil(async () => (await fx.api.pool.query(`select 1 from relayer_transactions where purpose = 'charge' and status = 'pending'`)).rowCount === 0, STATE_TIMEOUT_MS, 100);
}

const chargedPeriods = async (onchainId: bigint) =>
  (await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id: onchainId }, fromBlock: 0n })).map((l) => l.args.periodIndex!);

describe('the merchant cancels over the API while the worker holds the period in a charge batch', () => {
  it('API cancel committed after the charge was decided, before it was sent: no charge is sent once the API said canceled, and the customer is not pulled', async () => {
    const payer = chain.payers[4];
    const { sub, onchainId, gate } = await subscribeHeld(payer, 'cancel-race');
    // Period 1 has begun; the worker decided to charge it and is simulating (the node is slow).
    await waitUntil(async () => gate.reached, STATE_TIMEOUT_MS, 20);
    const balanceBefore = await chain.balanceOf(payer.address);

    const canceled = await api.post(`/v1/subscriptions/${sub.id}/cancel`, key());
    const canceledAt = Date.now();
    expect(canceled.status, canceled.raw).toBe(200);
    expect(canceled.body.data).toMatchObject({ status: 'canceled', canceled_by: 'merchant' });

    gate.release();
    await chargeJobDone(onchainId);
    releaseCancels();
    await waitUntil(
      async () => (await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Canceled', args: { id: onchainId }, fromBlock: 0n })).length === 1,
      STATE_TIMEOUT_MS,
      100,
    );

    // Nothing was sent, charged or pulled for the canceled subscription.
    expect.soft(chargeSends.filter((c) => c.onchainId === onchainId && c.at >= canceledAt)).toEqual([]);
    expect.soft(await chargedPeriods(onchainId)).toEqual([]);
    expect.soft(await chain.balanceOf(payer.address)).toBe(balanceBefore);
    expect((await api.get(`/v1/subscriptions/${sub.id}`, key())).body.data).toMatchObject({ status: 'canceled', canceled_by: 'merchant' });
  }, 240_000);
});

describe('the merchant voids the period invoice while the worker holds it in a charge batch', () => {
  it('period invoice voided after the charge was decided, before it was sent ("a period invoice the merchant voided is not billed"): no charge is sent for it, the customer is not pulled', async () => {
    releaseCancels();
    const payer = chain.payers[5];
    const { sub, onchainId, gate } = await subscribeHeld(payer, 'void-race');
    await waitUntil(async () => gate.reached, STATE_TIMEOUT_MS, 20);
    const balanceBefore = await chain.balanceOf(payer.address);
    const { rows } = await fx.api.pool.query<{ id: string }>(`select id from invoices where subscription_id = $1 and period_index = 1`, [sub.id]);

    const voided = await api.post(`/v1/invoices/${rows[0].id}/void`, key());
    const voidedAt = Date.now();
    expect(voided.status, voided.raw).toBe(200);
    expect(voided.body.data.status).toBe('void');

    gate.release();
    await chargeJobDone(onchainId);

    expect.soft(chargeSends.filter((c) => c.onchainId === onchainId && c.periodIndex === 1 && c.at >= voidedAt)).toEqual([]);
    expect.soft(await chargedPeriods(onchainId)).not.toContain(1);
    expect.soft(await chain.balanceOf(payer.address)).toBe(balanceBefore);
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'customer', onchain_canceled_at = now() where id = $1`, [sub.id]);
  }, 240_000);
});
