// The subscription contract's Subscribed and Canceled logs as kinds of their own
// (src/chain/kinds/subscribe.ts, cancel.ts), on anvil through a real worker: a real
// approve+subscribe against a checkout pays the checkout's invoice once confirmed and makes the
// subscription (every field from the chain and the checkout); terms the payer changed make
// nothing and count to no invoice; a reference used twice makes one subscription; a cancel by the
// subscriber is the customer's.
import { randomBytes } from 'node:crypto';
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
const merchantAccount = privateKeyToAccount(generatePrivateKey());
const operatorAccount = privateKeyToAccount(generatePrivateKey());
const merchant = merchantAccount.address.toLowerCase() as Address;
const operator = operatorAccount.address.toLowerCase() as Address;
const PERIOD = 3600;
const AMOUNT = 10_000_000n;
const FEE_BPS = 50;

let fixture: ChainFixture | undefined;
beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: merchant });
  ({ chain, fx } = fixture);
  // Gas for the payee's and the operator's own cancels.
  for (const a of [merchant, operator]) await chain.testClient.setBalance({ address: a, value: 10n ** 19n });
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

interface Checkout {
  id: string;
  reference: Hex;
  invoice: JsonBody;
  priceId: string;
  customerId: string;
  accountId: string;
}

/**
 * A subscription checkout as POST /pay/<link>/subscribe makes it (not in main yet: mirrored in SQL):
 * the first period's invoice (sent, with its payment reference) and the exact terms.
 */
async function checkout(): Promise<Checkout> {
  const invoice = await sentInvoice('10.00');
  const { rows } = await fx.api.pool.query<{ customer_id: string; account_id: string }>('select customer_id, account_id from invoices where id = $1', [invoice.id]);
  const { account_id: accountId, customer_id: customerId } = rows[0];
  const productId = newId('prod');
  const priceId = newId('price');
  const linkId = newId('plink');
  await fx.api.pool.query(`insert into products (id, account_id, environment, name) values ($1, $2, 'sandbox', 'Plan')`, [productId, accountId]);
  await fx.api.pool.query(
    `insert into prices (id, account_id, environment, product_id, amount, amount_atomic, currency, network, chain_id, token_address, token_decimals, cadence, interval_seconds)
     values ($1, $2, 'sandbox', $3, 10, $4, 'USDC', 'local', $5, $6, 6, 'monthly', $7)`,
    [priceId, accountId, productId, AMOUNT.toString(), chain.chainId, chain.token, PERIOD],
  );
  await fx.api.pool.query(`insert into payment_links (id, account_id, environment, name, type, price_id, currency, network, chain_id, token_decimals)
     values ($1, $2, 'sandbox', 'Plan', 'fixed_price', $3, 'USDC', 'local', $4, 6)`,
    [linkId, accountId, priceId, chain.chainId]);
  const id = `subco_${randomBytes(8).toString('hex')}`;
  const reference = `0x${randomBytes(32).toString('hex')}` as Hex;
  await fx.api.pool.query(
    `insert into subscription_checkouts (id, account_id, environment, payment_link_id, price_id, customer_id, invoice_id, checkout_reference, chain_id,
       contract_address, payee_address, token_address, amount_atomic, period_seconds, fee_bps, fee_address, operator_address, ends_at)
     values ($1, $2, 'sandbox', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, null)`,
    [id, accountId, linkId, priceId, customerId, invoice.id, reference, chain.chainId, chain.subscriptionManager, merchant, chain.token, AMOUNT.toString(), PERIOD, FEE_BPS, chain.feeAddress, operator],
  );
  return { id, reference, invoice, priceId, customerId, accountId };
}

interface Terms {
  payee: Address;
  amount: bigint;
  feeBps: number;
  operator: Address;
}
const rightTerms = (): Terms => ({ payee: merchant, amount: AMOUNT, feeBps: FEE_BPS, operator });

/** approve + subscribe from `payer`, mined: the on-chain id and the transaction. */
async function subscribe(payer: Address, reference: Hex, terms: Terms): Promise<{ id: bigint; tx: Hex; block: bigint }> {
  const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
  await chain.publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({ account: payer, chain: null, address: chain.token, abi: TEST_USDC_ABI, functionName: 'approve', args: [chain.subscriptionManager, terms.amount * 10n] }),
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      account: payer,
      chain: null,
      address: chain.subscriptionManager,
      abi: SUBSCRIPTION_MANAGER_ABI,
      functionName: 'subscribe',
      args: [{ payee: terms.payee, token: chain.token, amount: terms.amount, period: PERIOD, feeBps: terms.feeBps, feeAddress: chain.feeAddress, operator: terms.operator, endsAt: 0, checkoutReference: reference }],
    }),
  });
  expect(receipt.status).toBe('success');
  return { id: parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: receipt.logs })[0].args.id, tx: receipt.transactionHash, block: receipt.blockNumber };
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;
const paymentsOfTx = async (txHash: string, status = 'confirmed') =>
  (await fx.api.pool.query<{ kind: string; invoice_id: string | null; outcome: string | null; received_atomic: string; fee_received_atomic: string; counted_atomic: string | null }>(
    `select kind, invoice_id, outcome, received_atomic::text, fee_received_atomic::text, counted_atomic::text from payments where tx_hash = $1 and status = $2 order by tx_position`,
    [txHash, status],
  )).rows;
const subscriptionsOf = async (reference: string) =>
  (await fx.api.pool.query<Record<string, unknown>>(
    `select s.*, s.amount::text as amount, s.amount_atomic::text as amount_atomic from subscriptions s
     where s.checkout_reference = $1 or s.id = (select subscription_id from subscription_checkouts where checkout_reference = $1)`,
    [reference],
  )).rows;
const ignoredSubscribeLogs = async () => {
  const values = (await fixture!.worker.metrics.registry.getSingleMetric('chain_ignored_logs_total')!.get()).values;
  return values.filter((v) => v.labels.kind === 'subscribe' && v.labels.reason === 'unmatched').reduce((a, v) => a + v.value, 0);
};
const blockTime = async (block: bigint) => new Date(Number((await chain.publicClient.getBlock({ blockNumber: block })).timestamp) * 1000);

describe('a subscribe call', () => {
  it('with the checkout terms: pending, then on confirmation the subscription (every field) and the period-0 invoice paid', async () => {
    const c = await checkout();
    const payer = chain.payers[0].address;
    const { id, tx, block } = await subscribe(payer, c.reference, rightTerms());
    // Below the confirmations: a pending payment, no subscription yet.
    await waitUntil(async () => (await paymentsOfTx(tx, 'pending')).length > 0, 60_000);
    expect(await subscriptionsOf(c.reference)).toEqual([]);
    expect((await invoice(c.invoice.id)).status).toBe('open');

    await chain.mine(3);
    await waitUntil(async () => (await invoice(c.invoice.id)).status === 'paid', 60_000);
    expect(await paymentsOfTx(tx)).toEqual([
      { kind: 'subscribe', invoice_id: c.invoice.id, outcome: 'applied', received_atomic: '9950000', fee_received_atomic: '50000', counted_atomic: '10000000' },
    ]);
    const started = await blockTime(block);
    const subs = await subscriptionsOf(c.reference);
    expect(subs).toHaveLength(1);
    expect(subs[0]).toMatchObject({
      account_id: c.accountId,
      environment: 'sandbox',
      customer_id: c.customerId,
      price_id: c.priceId,
      status: 'active',
      mode: 'pull',
      amount: '10',
      amount_atomic: AMOUNT.toString(),
      currency: 'USDC',
      cadence: 'monthly',
      interval_seconds: PERIOD,
      network: 'local',
      chain_id: chain.chainId,
      contract_address: chain.subscriptionManager.toLowerCase(),
      onchain_id: id.toString(),
      subscriber_address: payer.toLowerCase(),
      payee_address: merchant,
      token_address: chain.token.toLowerCase(),
      token_decimals: 6,
      fee_address: chain.feeAddress.toLowerCase(),
      operator_address: operator,
      platform_fee_bps: FEE_BPS,
      started_at: started,
      current_period_start: started,
      next_charge_at: new Date(started.getTime() + PERIOD * 1000),
      ends_at: null,
      checkout_reference: c.reference,
      canceled_by: null,
      onchain_canceled_at: null,
    });
    const subId = subs[0].id as string;
    const { rows: inv } = await fx.api.pool.query('select subscription_id, period_index, period_start, period_end from invoices where id = $1', [c.invoice.id]);
    expect(inv[0]).toEqual({ subscription_id: subId, period_index: 0, period_start: started, period_end: new Date(started.getTime() + PERIOD * 1000) });
    const { rows: checkoutRow } = await fx.api.pool.query('select subscription_id from subscription_checkouts where id = $1', [c.id]);
    expect(checkoutRow[0].subscription_id).toBe(subId);
    const { rows: events } = await fx.api.pool.query<{ type: string }>(`select type from events where object_id = $1 order by created_at`, [subId]);
    expect(events.map((e) => e.type)).toEqual(['subscription.created']);

    // The subscriber cancels on the contract: canceled by the customer, at the block's time.
    const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
    const cancel = await chain.publicClient.waitForTransactionReceipt({
      hash: await wallet.writeContract({ account: payer, chain: null, address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [id] }),
    });
    await chain.mine(3);
    await waitUntil(async () => (await subscriptionsOf(c.reference))[0].status === 'canceled', 60_000);
    expect((await subscriptionsOf(c.reference))[0]).toMatchObject({ status: 'canceled', canceled_by: 'customer', onchain_canceled_at: await blockTime(cancel.blockNumber) });
    const { rows: after } = await fx.api.pool.query<{ type: string; canceled_by: string | null }>(
      `select type, object->>'canceled_by' as canceled_by from events where object_id = $1 order by created_at`,
      [subId],
    );
    expect(after).toEqual([
      { type: 'subscription.created', canceled_by: null },
      { type: 'subscription.canceled', canceled_by: 'customer' },
    ]);
  });

  it('with terms the payer changed: no subscription, the checkout invoice unpaid, its legs no plain transfer to an open invoice of exactly that amount', async () => {
    const c = await checkout();
    // An open invoice to the merchant owing exactly what the changed call moves to the merchant.
    const bait = await sentInvoice('1.00');
    const ignoredBefore = await ignoredSubscribeLogs();
    const cheap = await subscribe(chain.payers[1].address, c.reference, { payee: merchant, amount: 1_000_000n, feeBps: 0, operator });
    const self = await subscribe(chain.payers[2].address, c.reference, { payee: chain.payers[2].address, amount: AMOUNT, feeBps: FEE_BPS, operator: chain.payers[2].address });
    await chain.mine(3);
    await waitUntil(async () => (await paymentsOfTx(cheap.tx)).length > 0, 60_000);
    // The self-paying call moved nothing to anyone's settlement address: no payment row at all.
    await waitUntil(async () => (await fx.api.pool.query(`select 1 from chain_cursors where chain_id = $1 and block_number >= $2`, [chain.chainId, self.block.toString()])).rowCount === 1, 60_000);
    expect(await paymentsOfTx(cheap.tx)).toEqual([
      { kind: 'subscribe', invoice_id: null, outcome: 'unmatched', received_atomic: '1000000', fee_received_atomic: '0', counted_atomic: null },
    ]);
    expect(await paymentsOfTx(self.tx)).toEqual([]);
    expect(await subscriptionsOf(c.reference)).toEqual([]);
    expect(await invoice(c.invoice.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect(await invoice(bait.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    // The one that reached the merchant is counted as a subscribe log that made nothing.
    expect(await ignoredSubscribeLogs()).toBeGreaterThanOrEqual(ignoredBefore + 1);
  });

  it('the same reference used twice: one subscription; the second call pays nothing', async () => {
    const c = await checkout();
    const first = await subscribe(chain.payers[3].address, c.reference, rightTerms());
    const second = await subscribe(chain.payers[4].address, c.reference, rightTerms());
    await chain.mine(3);
    await waitUntil(async () => (await paymentsOfTx(second.tx)).length > 0 && (await paymentsOfTx(first.tx)).length > 0, 60_000);
    const subs = await subscriptionsOf(c.reference);
    expect(subs).toHaveLength(1);
    expect(subs[0]).toMatchObject({ onchain_id: first.id.toString(), subscriber_address: chain.payers[3].address.toLowerCase() });
    expect(await paymentsOfTx(first.tx)).toMatchObject([{ kind: 'subscribe', invoice_id: c.invoice.id, outcome: 'applied' }]);
    expect(await paymentsOfTx(second.tx)).toMatchObject([{ kind: 'subscribe', invoice_id: null, outcome: 'unmatched', counted_atomic: null }]);
    expect(await invoice(c.invoice.id)).toMatchObject({ status: 'paid', amount_paid_atomic: AMOUNT.toString() });
  });
});

describe('a cancel on the contract', () => {
  async function subscribed(payer: Address): Promise<{ c: Checkout; id: bigint; subId: string }> {
    const c = await checkout();
    const { id } = await subscribe(payer, c.reference, rightTerms());
    await chain.mine(3);
    await waitUntil(async () => (await subscriptionsOf(c.reference)).length === 1, 60_000);
    return { c, id, subId: (await subscriptionsOf(c.reference))[0].id as string };
  }
  const cancelAs = async (account: typeof merchantAccount, id: bigint) => {
    const wallet = createWalletClient({ account, transport: http(chain.rpcUrl) });
    const receipt = await chain.publicClient.waitForTransactionReceipt({
      hash: await wallet.writeContract({ chain: null, address: chain.subscriptionManager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [id] }),
    });
    expect(receipt.status).toBe('success');
    await chain.mine(3);
    return blockTime(receipt.blockNumber);
  };
  const eventsOf = async (subId: string) =>
    (await fx.api.pool.query<{ type: string; canceled_by: string | null }>(`select type, object->>'canceled_by' as canceled_by from events where object_id = $1 order by created_at`, [subId])).rows;

  it('by the payee: canceled by the merchant', async () => {
    const { c, id, subId } = await subscribed(chain.payers[5].address);
    const at = await cancelAs(merchantAccount, id);
    await waitUntil(async () => (await subscriptionsOf(c.reference))[0].onchain_canceled_at !== null, 60_000);
    expect((await subscriptionsOf(c.reference))[0]).toMatchObject({ status: 'canceled', canceled_by: 'merchant', onchain_canceled_at: at });
    expect(await eventsOf(subId)).toEqual([
      { type: 'subscription.created', canceled_by: null },
      { type: 'subscription.canceled', canceled_by: 'merchant' },
    ]);
  });

  it('by the operator, after the API or dunning canceled the row: only onchain_canceled_at, no second event', async () => {
    const { c, id, subId } = await subscribed(chain.payers[6].address);
    // As dunning does it (status first, then the relayer's on-chain cancel).
    await fx.api.pool.query(`update subscriptions set status = 'canceled', canceled_by = 'dunning', canceled_at = now() where id = $1`, [subId]);
    const at = await cancelAs(operatorAccount, id);
    await waitUntil(async () => (await subscriptionsOf(c.reference))[0].onchain_canceled_at !== null, 60_000);
    expect((await subscriptionsOf(c.reference))[0]).toMatchObject({ status: 'canceled', canceled_by: 'dunning', onchain_canceled_at: at });
    expect(await eventsOf(subId)).toEqual([
      { type: 'subscription.created', canceled_by: null },
      { type: 'subscription.canceled', canceled_by: 'dunning' },
    ]);
  });
});
