// The subscription contract's Charged log as a kind of its own (src/chain/kinds/charge.ts), on
// anvil through a real worker: the period's legs count toward that period's invoice, by the money
// rules of the proxy, and never as a plain transfer; a charge naming another period pays nothing.
import { createWalletClient, http, parseEventLogs, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { newId } from '../../src/domain/ids.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const PERIOD = 3600;
const AMOUNT = 10_000_000n;

let fixture: ChainFixture | undefined;
beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: merchant.toLowerCase() });
  ({ chain, fx } = fixture);
}, 120_000);
afterAll(async () => {
  await fixture?.close();
});

async function sentInvoice(amount: string): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key(), { customer_email: `sub-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

/** A subscription on the contract (its first period pulled by the subscribe call), operated by `operator`. */
async function subscribeOnChain(payer: Address, operator: Address, feeBps: number): Promise<bigint> {
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  await chain.publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({ account: payer, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, AMOUNT * 10n] }),
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      account: payer,
      chain: null,
      address: chain.subscriptionManager,
      abi: SUBSCRIPTION_MANAGER_ABI,
      functionName: 'subscribe',
      args: [{ payee: merchant, token: chain.token, amount: AMOUNT, period: PERIOD, feeBps, feeAddress: chain.feeAddress, operator, endsAt: 0, checkoutReference: `0x${'33'.repeat(32)}` }],
    }),
  });
  return parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs })[0].args.id;
}

/** The subscription row the watcher would have made, and the invoice made period `periodIndex` of it (SQL: the subscribe kind is not written yet). */
async function periodInvoice(inv: JsonBody, onchainId: bigint, periodIndex: number): Promise<void> {
  const { rows } = await fx.api.pool.query<{ customer_id: string; account_id: string }>('select customer_id, account_id from invoices where id = $1', [inv.id]);
  const productId = newId('prod');
  const priceId = newId('price');
  const subscriptionId = newId('sub');
  await fx.api.pool.query(`insert into products (id, account_id, environment, name) values ($1, $2, 'sandbox', 'Plan')`, [productId, rows[0].account_id]);
  await fx.api.pool.query(
    `insert into prices (id, account_id, environment, product_id, amount, amount_atomic, currency, network, chain_id, token_address, token_decimals, cadence)
     values ($1, $2, 'sandbox', $3, 10, $4, 'USDC', 'local', $5, $6, 6, 'monthly')`,
    [priceId, rows[0].account_id, productId, AMOUNT.toString(), chain.chainId, chain.token],
  );
  await fx.api.pool.query(
    `insert into subscriptions (id, account_id, environment, customer_id, price_id, status, mode, amount, amount_atomic, currency, cadence, interval_seconds,
       network, chain_id, contract_address, onchain_id, platform_fee_bps, started_at, current_period_start)
     values ($1, $2, 'sandbox', $3, $4, 'active', 'pull', 10, $5, 'USDC', 'monthly', $6, 'local', $7, $8, $9, 50, now(), now())`,
    [subscriptionId, rows[0].account_id, rows[0].customer_id, priceId, AMOUNT.toString(), PERIOD, chain.chainId, chain.subscriptionManager, onchainId.toString()],
  );
  await fx.api.pool.query('update invoices set subscription_id = $2, period_index = $3 where id = $1', [inv.id, subscriptionId, periodIndex]);
}

async function chargeOnChain(operator: Address, onchainId: bigint, periodIndex: number, reference: Hex): Promise<Hex> {
  await chain.testClient.increaseTime({ seconds: PERIOD * periodIndex + 1 });
  await chain.mine(1);
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  const hash = await wallet.writeContract({ account: operator, chain: null, address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'charge', args: [onchainId, periodIndex, reference] });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;
const paymentsOfTx = async (txHash: string) =>
  (await fx.api.pool.query<{ kind: string; invoice_id: string | null; outcome: string | null; received_atomic: string; fee_received_atomic: string; counted_atomic: string | null }>(
    `select kind, invoice_id, outcome, received_atomic::text, fee_received_atomic::text, counted_atomic::text from payments where tx_hash = $1 and status = 'confirmed'`,
    [txHash],
  )).rows;

describe('a subscription charge', () => {
  it('pays the invoice of its period: what its legs moved counts (the fee that reached the fee address up to the invoice fee), and its legs are no plain transfer', async () => {
    const operator = chain.payers[5].address;
    // The invoice's own fee is 0.5% (the account's rate): the contract's terms say the same.
    const inv = await sentInvoice('10.00');
    const id = await subscribeOnChain(chain.payers[4].address, operator, 50);
    await periodInvoice(inv, id, 1);
    const tx = await chargeOnChain(operator, id, 1, inv.payment_instructions.payment_reference as Hex);
    await chain.mine(3);
    await waitUntil(async () => (await invoice(inv.id)).status === 'paid', 60_000);
    expect(await paymentsOfTx(tx)).toEqual([
      { kind: 'charge', invoice_id: inv.id, outcome: 'applied', received_atomic: '9950000', fee_received_atomic: '50000', counted_atomic: '10000000' },
    ]);
    expect((await invoice(inv.id)).amount_paid_atomic).toBe('10000000');
  });

  it('naming another period of the subscription, it pays nothing (unmatched), and its legs are not a plain transfer either', async () => {
    const operator = chain.payers[6].address;
    const inv = await sentInvoice('10.00');
    const id = await subscribeOnChain(chain.payers[3].address, operator, 50);
    await periodInvoice(inv, id, 2);
    const tx = await chargeOnChain(operator, id, 1, inv.payment_instructions.payment_reference as Hex);
    await chain.mine(3);
    await waitUntil(async () => (await paymentsOfTx(tx)).length > 0, 60_000);
    expect(await paymentsOfTx(tx)).toEqual([
      { kind: 'charge', invoice_id: null, outcome: 'unmatched', received_atomic: '9950000', fee_received_atomic: '50000', counted_atomic: null },
    ]);
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
  });
});
