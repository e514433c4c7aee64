// Adversarial test of recurring payments (issue 26): a node whose eth_call lies that a charge would
// succeed. On anvil with the API, a real worker (the watcher, the subscription jobs) and the
// service's relayer, whose simulateCharge answers `ok` while the lie is on: what pays a period is
// only a confirmed Charged log, so the period stays unpaid, nothing reaches the chain (the
// relayer's own gas estimate refuses the call: nothing is signed), and no attempt is counted
// against the customer; once the node tells the truth, the attempt is counted as usual.
import { createWalletClient, http } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRelayer } from '../../src/chain/relayer.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
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
let lying = true;
let liesTold = 0;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

beforeAll(async () => {
  fixture = await startChainFixture({
    settlementAddress: MERCHANT,
    listen: true,
    env: { RELAYER_PRIVATE_KEY_31337: operatorKey, SUBSCRIPTION_POLL_INTERVAL_MS: '200', DUNNING_SCHEDULE: 'PT10M' },
    worker: ({ fx: f, config }) => {
      const real = createRelayer({
        pool: f.api.pool,
        chains: config.chains,
        keys: readRelayerKeys(config),
        stuckBlocks: config.relayerStuckBlocks,
        minBalance: config.relayerMinBalance,
        log: createLogger('silent'),
      });
      // The node's eth_call of the charge answers success while `lying`.
      const relayer: SubscriptionRelayer = {
        operatorAddress: (chainId) => real.operatorAddress(chainId),
        simulateCharge: async (chainId, target) => {
          if (!lying) return real.simulateCharge(chainId, target);
          liesTold++;
          return { ok: true };
        },
        sendCharge: (chainId, target) => real.sendCharge(chainId, target),
        sendCancel: (chainId, target) => real.sendCancel(chainId, target),
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
  clearInterval(miner);
  await fixture?.close();
});

async function subscriptionWork(outcome: string): Promise<number> {
  const metric = fixture!.worker.metrics.registry.getSingleMetric('subscription_work_total');
  const values = metric ? (await metric.get()).values : [];
  return values.filter((v) => v.labels.job === 'subscriptions.charge' && v.labels.outcome === outcome).reduce((a, v) => a + v.value, 0);
}

describe('a node lying that a charge would succeed', () => {
  it('the period is not paid, nothing is signed or counted against the customer; told the truth, the attempt is counted', async () => {
    const payer = chain.payers[4];
    const email = `liar-${Math.random().toString(36).slice(2)}@example.test`;
    const answer = await subscriptionCheckoutAnswer(fx.api.app, linkId, email);
    const { onchainId } = await sendSubscription({ rpcUrl: chain.rpcUrl, answer }, payer.privateKey);
    let sub: JsonBody | undefined;
    await waitUntil(async () => (sub = (await api.get(`/v1/subscriptions?customer_email=${encodeURIComponent(email)}`, key())).body.data[0]) !== undefined, STATE_TIMEOUT_MS, 250);
    // The customer revokes the allowance: every charge would revert.
    const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
    await chain.publicClient.waitForTransactionReceipt({
      hash: await wallet.writeContract({ account: payer.address, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, 0n] }),
    });

    // Period 1 begins; the worker believes the lie and asks the relayer to send, more than once.
    const faultsBefore = await subscriptionWork('relayer_fault');
    await waitUntil(async () => liesTold >= 2 && (await subscriptionWork('relayer_fault')) >= faultsBefore + 2, STATE_TIMEOUT_MS, 250);
    const period = async () =>
      (await fx.api.pool.query<{ id: string; status: string; attempt_count: number; failure_code: string | null; charge_sent_at: Date | null; amount_paid_atomic: string }>(
        `select id, status, attempt_count, failure_code, charge_sent_at, amount_paid_atomic::text from invoices where subscription_id = $1 and period_index = 1`,
        [sub!.id],
      )).rows[0];
    expect(await period()).toMatchObject({ status: 'open', attempt_count: 0, failure_code: null, charge_sent_at: null, amount_paid_atomic: '0' });
    const inv = await period();
    expect((await fx.api.pool.query(`select 1 from payments where invoice_id = $1`, [inv.id])).rowCount).toBe(0);
    // Nothing signed (the relayer's own estimate refused the call), nothing on the chain.
    expect((await fx.api.pool.query(`select 1 from relayer_transactions where purpose = 'charge'`)).rowCount).toBe(0);
    const charged = await chain.publicClient.getContractEvents({ address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', args: { id: onchainId }, fromBlock: 0n });
    expect(charged).toEqual([]);
    expect((await api.get(`/v1/subscriptions/${sub!.id}`, key())).body.data.status).toBe('active');

    // The node tells the truth again: the allowance is short, one attempt counted, past_due.
    lying = false;
    await waitUntil(async () => (await period()).failure_code === 'insufficient_allowance', STATE_TIMEOUT_MS, 250);
    expect(await period()).toMatchObject({ status: 'open', attempt_count: 1, failure_code: 'insufficient_allowance', amount_paid_atomic: '0' });
    expect((await api.get(`/v1/subscriptions/${sub!.id}`, key())).body.data.status).toBe('past_due');
  }, 240_000);
});
