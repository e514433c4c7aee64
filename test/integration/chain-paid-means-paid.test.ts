// Issue 24, "Paid means paid", performed as an attacker would on a real chain (anvil, Request's
// ERC20FeeProxy, the 6-decimal test USDC) against the API and a worker watching it: a fee that
// never moved (fee address zero, the payer's own address, a feeAmount of 2^256 - 2, also through a
// public payment-link checkout), one transaction paying two invoices, zero-value and dust spam, and
// a confirmed payment reorged out deeper than the confirmations then re-included. Each leaves the
// invoice with what really reached its merchant; and a few seeded random sequences of all of it.
// States are waited for, never a clock.
import { createWalletClient, http, type Address, type Hash, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { seededRandom } from '../helpers/seeded-random.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let fixture: ChainFixture | undefined;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
const ZERO: Address = '0x0000000000000000000000000000000000000000';
const STATE_MS = 30_000;

beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: merchant, listen: true });
  ({ chain, fx } = fixture);
}, 120_000);
afterAll(async () => {
  await fixture?.close();
});

async function sentInvoice(amount: string): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key(), { customer_email: `payer-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;
const paymentsOf = async (id: string): Promise<JsonBody[]> => (await api.get(`/v1/invoices/${id}/payments`, key())).body.data as JsonBody[];

async function rowsOfTx(txHash: string): Promise<{ id: string; status: string; invoice_id: string | null; log_index: number }[]> {
  const { rows } = await fx.api.pool.query<{ id: string; status: string; invoice_id: string | null; log_index: number }>(
    'select id, status, invoice_id, log_index from payments where tx_hash = $1 order by id',
    [txHash],
  );
  return rows;
}

async function eventCounts(objectId: string): Promise<Record<string, number>> {
  const { rows } = await fx.api.pool.query<{ type: string; n: number }>('select type, count(*)::int as n from events where object_id = $1 group by type', [objectId]);
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

async function cursorBlock(): Promise<bigint> {
  const { rows } = await fx.api.pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chain.chainId]);
  return rows[0] ? BigInt(rows[0].block_number) : -1n;
}

/** Mines the confirmations and waits until the worker's cursor passed `block`: everything in it is recorded for good. */
async function confirmedPast(block: bigint): Promise<void> {
  await chain.mine(2);
  await waitUntil(async () => (await cursorBlock()) >= block, STATE_MS);
}

/** A JSON-RPC call viem's public actions do not name. */
const rpc = (method: string, params: unknown[]): Promise<unknown> =>
  (chain.publicClient.request as (args: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params });

async function ignoredCount(reason: string): Promise<number> {
  const metric = await fixture!.worker.metrics.registry.getSingleMetric('chain_ignored_transfers_total')!.get();
  return metric.values.filter((v) => v.labels.reason === reason).reduce((a, v) => a + v.value, 0);
}

/** A proxy call naming `inv`'s reference and settlement address with the given amounts and fee address. */
function payCrafted(inv: JsonBody, amountAtomic: bigint, feeAtomic: bigint, feeAddress: Address, from = chain.payers[1].address) {
  const pi = inv.payment_instructions;
  return chain.payWithReference({ from, to: pi.to, amountAtomic, feeAtomic, feeAddress, reference: pi.payment_reference });
}

/** After the attack: the invoice is not paid, it holds exactly what reached the merchant, and its one payment says so. */
async function expectNotPaid(invId: string, txHash: Hash, received: bigint): Promise<void> {
  await waitUntil(async () => (await paymentsOf(invId)).some((p) => p.status === 'confirmed'), STATE_MS);
  const inv = await invoice(invId);
  expect(inv).toMatchObject({ status: 'open', amount_paid_atomic: received.toString() });
  const payments = await paymentsOf(invId);
  expect(payments).toHaveLength(1);
  expect(payments[0]).toMatchObject({ tx_hash: txHash, outcome: 'applied', received_atomic: received.toString(), counted_atomic: received.toString(), fee_collected: false });
  expect(await eventCounts(invId)).not.toHaveProperty('invoice.paid');
}

describe('a fee that never moved counts nothing (finding 1)', () => {
  it('amount 1, feeAmount 100 USDC - 1, fee address zero: the 100 USDC invoice holds 1 and stays open', async () => {
    const inv = await sentInvoice('100.00');
    const before = await chain.balanceOf(merchant);
    const paid = await payCrafted(inv, 1n, 100_000_000n - 1n, ZERO);
    // The proxy moved no fee: the merchant got 1, the fee address nothing.
    expect(await chain.balanceOf(merchant)).toBe(before + 1n);
    await confirmedPast(paid.blockNumber);
    await expectNotPaid(inv.id, paid.txHash, 1n);
  });

  it("the same with the payer's own address as fee address: the fee went back to the payer", async () => {
    const inv = await sentInvoice('100.00');
    const paid = await payCrafted(inv, 1n, 100_000_000n - 1n, chain.payers[1].address);
    await confirmedPast(paid.blockNumber);
    await expectNotPaid(inv.id, paid.txHash, 1n);
  });

  it('feeAmount 2^256 - 2 with fee address zero: no 1e77 total, the invoice holds 1', async () => {
    const inv = await sentInvoice('100.00');
    const paid = await payCrafted(inv, 1n, 2n ** 256n - 2n, ZERO, chain.payers[2].address);
    await confirmedPast(paid.blockNumber);
    await expectNotPaid(inv.id, paid.txHash, 1n);
    const [p] = await paymentsOf(inv.id);
    // The event's claim is shown as such; it counted nothing.
    expect(p.fee_atomic).toBe((2n ** 256n - 2n).toString());
  });

  it('through a public payment-link checkout: the checkout invoice holds 1 and stays open', async () => {
    const link = await api.post('/v1/payment-links', key(), { name: 'Tip jar', type: 'custom_amount', currency: 'USDC', network: 'local', min_amount: '1', max_amount: '500' });
    expect(link.status, link.raw).toBe(200);
    const origin = fixture!.origin!;
    const res = await fetch(`${origin}/pay/${link.body.data.id}/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', origin, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ amount: '100', customer_email: 'attacker@example.test' }),
    });
    const made = (await res.json()) as JsonBody;
    expect(res.status, JSON.stringify(made)).toBe(200);
    const { rows } = await fx.api.pool.query<{ id: string }>('select id from invoices where payment_link_id = $1', [link.body.data.id]);
    expect(rows).toHaveLength(1);
    const inv = await invoice(rows[0].id);
    const paid = await payCrafted(inv, 1n, 100_000_000n - 1n, ZERO, chain.payers[3].address);
    await confirmedPast(paid.blockNumber);
    await expectNotPaid(inv.id, paid.txHash, 1n);
    // Nor is it a payment of the link (a checkout counts once paid in full).
    expect((await api.get(`/v1/payment-links/${link.body.data.id}`, key())).body.data.payment_count).toBe(0);
  });

  it('an honest payment still pays: merchant share plus the fee that reached the fee address', async () => {
    const inv = await sentInvoice('40.00');
    const pi = inv.payment_instructions;
    const paid = await chain.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
    await confirmedPast(paid.blockNumber);
    await waitUntil(async () => (await invoice(inv.id)).status === 'paid', STATE_MS);
    const [p] = await paymentsOf(inv.id);
    expect(p).toMatchObject({ received_atomic: '39800000', counted_atomic: '40000000', fee_collected: true });
  });
});

describe('one transaction never pays two invoices (finding 2)', () => {
  it('fee address = the settlement address: the fee leg is part of the proxy payment, not a plain transfer paying another open invoice', async () => {
    const a = await sentInvoice('20.00');
    const b = await sentInvoice('5.00');
    const paid = await payCrafted(a, 5_000_000n, 5_000_000n, merchant);
    await confirmedPast(paid.blockNumber);
    await waitUntil(async () => (await paymentsOf(a.id)).some((p) => p.status === 'confirmed'), STATE_MS);
    expect(await rowsOfTx(paid.txHash)).toEqual([expect.objectContaining({ invoice_id: a.id, status: 'confirmed' })]);
    // The fee went to the merchant, not to the platform's fee address: only the amount counts.
    expect(await invoice(a.id)).toMatchObject({ status: 'open', amount_paid_atomic: '5000000' });
    expect(await invoice(b.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect(await paymentsOf(b.id)).toEqual([]);
  });
});

describe('zero-value and dust transfers are no payments (finding 3)', () => {
  it('30 zero-value transfers to the settlement address make no row and no event; a real payment after them is found', async () => {
    const confirmedEvents = async () => (await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from events where type = 'payment.confirmed'`)).rows[0].n;
    const before = await confirmedEvents();
    const zeroBefore = await ignoredCount('zero_value');
    const hashes: Hash[] = [];
    for (let i = 0; i < 30; i++) hashes.push((await chain.transfer({ from: chain.payers[4].address, to: merchant, amountAtomic: 0n })).txHash);
    const inv = await sentInvoice('3.21');
    const real = await chain.transfer({ from: chain.payers[4].address, to: merchant, amountAtomic: 3_210_000n });
    await confirmedPast(real.blockNumber);
    await waitUntil(async () => (await invoice(inv.id)).status === 'paid', STATE_MS);
    const { rows } = await fx.api.pool.query('select 1 from payments where tx_hash = any($1::text[])', [hashes]);
    expect(rows).toHaveLength(0);
    // The real payment's, nothing else.
    expect((await confirmedEvents()) - before).toBe(1);
    expect((await ignoredCount('zero_value')) - zeroBefore).toBe(30);
  });

  it('a dust transfer below 0.01 USDC that matches no invoice makes no unmatched row', async () => {
    const dustBefore = await ignoredCount('dust');
    const dust = await chain.transfer({ from: chain.payers[4].address, to: merchant, amountAtomic: 9_999n });
    await confirmedPast(dust.blockNumber);
    expect(await rowsOfTx(dust.txHash)).toEqual([]);
    expect((await ignoredCount('dust')) - dustBefore).toBe(1);
  });
});

describe('a payment re-included after a deep reorg counts once (finding 7)', () => {
  it('confirmed partial of 10 on 20, a reorg deeper than the confirmations (reported, un-counted), a filler, the same signed transaction again: one row, 10 paid', async () => {
    const inv = await sentInvoice('20.00');
    const pi = inv.payment_instructions;
    const payer = chain.payers[6];
    // The approve (when needed) is mined in a block of its own before: the reorg leaves it, so the
    // payment signed once stays valid to send again.
    const paid = await chain.payWithReference({ from: payer.address, to: pi.to, amountAtomic: 9_950_000n, feeAtomic: 50_000n, reference: pi.payment_reference });
    const raw = (await rpc('eth_getRawTransactionByHash', [paid.txHash])) as Hex;
    await chain.mine(3);
    await waitUntil(async () => (await invoice(inv.id)).amount_paid_atomic === '10000000' && (await cursorBlock()) >= paid.blockNumber + 1n, STATE_MS);
    const [first] = await paymentsOf(inv.id);
    expect(first).toMatchObject({ status: 'confirmed', counted_atomic: '10000000', log_index: paid.logIndex });

    // Every block from the payment's on is replaced: 4 blocks deep, the chain confirms at 2.
    const head = await chain.publicClient.getBlockNumber();
    await chain.reorg(Number(head - paid.blockNumber + 1n));
    await waitUntil(async () => (await paymentsOf(inv.id))[0].reorged_out === true, STATE_MS);
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect((await paymentsOf(inv.id))[0]).toMatchObject({ status: 'removed', counted_atomic: null });
    expect(await eventCounts(first.id)).toMatchObject({ 'payment.reorged_out': 1 });

    // A filler transaction, then the same signed transaction, in one block: its logs come later in it.
    await chain.testClient.setAutomine(false);
    try {
      const wallet = createWalletClient({ transport: http(chain.rpcUrl) });
      // A higher tip: the block orders it before the re-sent payment.
      await wallet.writeContract({
        account: chain.payers[7].address,
        chain: null,
        address: chain.token,
        abi: TEST_USDC_ABI,
        functionName: 'transfer',
        args: [chain.payers[0].address, 1_000n],
        maxPriorityFeePerGas: 50_000_000_000n,
        maxFeePerGas: 500_000_000_000n,
      });
      await rpc('eth_sendRawTransaction', [raw]);
      await chain.mine(1);
    } finally {
      await chain.testClient.setAutomine(true);
    }
    const again = await chain.publicClient.getTransactionReceipt({ hash: paid.txHash });
    expect(again.status).toBe('success');
    await confirmedPast(again.blockNumber);
    await waitUntil(async () => (await paymentsOf(inv.id))[0].status === 'confirmed', STATE_MS);
    const rows = await rowsOfTx(paid.txHash);
    expect(rows).toHaveLength(1);
    expect(rows[0].log_index).not.toBe(paid.logIndex);
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '10000000' });
    expect((await paymentsOf(inv.id))[0]).toMatchObject({ status: 'confirmed', outcome: 'applied', counted_atomic: '10000000', reorged_out: false });
  });
});

describe('random sequences on anvil (seeded; the seed is in the name)', () => {
  type Step = { kind: 'proxy'; inv: JsonBody; amount: bigint; fee: bigint; feeAddress: Address } | { kind: 'transfer'; value: bigint };

  for (const seed of [24, 2024, 424242]) {
    it(`seed ${seed}: proxy payments with any fee address, zero, dust, exact and odd transfers, shallow reorgs: each invoice holds what reached its merchant`, async () => {
      const r = seededRandom(seed);
      // An address of its own: its plain transfers can only match this sequence's invoices.
      const to = privateKeyToAccount(generatePrivateKey()).address;
      expect((await api.patch('/v1/account', key(), { settlement_address: to })).status).toBe(200);
      const invoices: JsonBody[] = [];
      for (let i = 0; i < 3; i++) invoices.push(await sentInvoice(`${r.int(5, 30)}.${String(r.int(0, 99)).padStart(2, '0')}`));
      const sent: { hash: Hash; step: Step }[] = [];
      for (let op = 0; op < 9; op++) {
        const roll = r.next();
        const payer = chain.payers[r.int(0, 7)].address;
        if (roll < 0.5) {
          const inv = r.pick(invoices);
          const total = r.pick([BigInt(inv.amount_atomic), 2_000_000n, 1n]);
          const ruleFee = (total * 50n + 5_000n) / 10_000n;
          const feeAddress = r.pick<Address>([chain.feeAddress, chain.feeAddress, ZERO, payer, to]);
          const fee = feeAddress === ZERO && r.chance(0.5) ? 2n ** 256n - 2n : r.pick([ruleFee, 0n, 1_000_000n]);
          const step: Step = { kind: 'proxy', inv, amount: total - ruleFee, fee, feeAddress };
          const paid = await chain.payWithReference({ from: payer, to, amountAtomic: step.amount, feeAtomic: fee, feeAddress, reference: inv.payment_instructions.payment_reference });
          sent.push({ hash: paid.txHash, step });
        } else if (roll < 0.85) {
          const remaining = BigInt((await invoice(r.pick(invoices).id)).amount_remaining_atomic);
          const value = r.pick([0n, 0n, 5_000n, remaining, BigInt(r.int(1, 3_000_000))]);
          sent.push({ hash: (await chain.transfer({ from: payer, to, amountAtomic: value })).txHash, step: { kind: 'transfer', value } });
        } else {
          // Shallow: within the pending window (2 confirmations), what it held is dropped.
          await chain.reorg(r.int(1, 2));
        }
        if (r.chance(0.4)) await chain.mine(r.int(1, 3));
      }
      await chain.mine(3);
      const head = await chain.publicClient.getBlockNumber();
      await waitUntil(async () => (await cursorBlock()) >= head - 2n, STATE_MS);
      await waitUntil(async () => (await fx.api.pool.query(`select 1 from payments where lower(to_address) = lower($1) and status = 'pending'`, [to])).rowCount === 0, STATE_MS);

      // The rule over what the chain holds now, in its order.
      const canonical: { block: bigint; index: number; step: Step }[] = [];
      for (const s of sent) {
        const receipt = await chain.publicClient.getTransactionReceipt({ hash: s.hash }).catch(() => null);
        if (receipt) canonical.push({ block: receipt.blockNumber, index: receipt.transactionIndex, step: s.step });
      }
      canonical.sort((a, b) => (a.block === b.block ? a.index - b.index : a.block < b.block ? -1 : 1));
      const state = new Map(invoices.map((i) => [i.id, { paid: 0n, feeCounted: 0n, status: 'open' }]));
      const apply = (inv: JsonBody, received: bigint, feeToPlatform: bigint) => {
        const s = state.get(inv.id)!;
        if (s.status !== 'open') return;
        const room = BigInt(inv.fee_atomic) - s.feeCounted;
        const fee = feeToPlatform < room ? feeToPlatform : room;
        s.paid += received + fee;
        s.feeCounted += fee;
        if (s.paid >= BigInt(inv.amount_atomic)) s.status = 'paid';
      };
      for (const { step } of canonical) {
        if (step.kind === 'proxy') apply(step.inv, step.amount, step.feeAddress === chain.feeAddress ? step.fee : 0n);
        else if (step.value > 0n) {
          const open = invoices.filter((i) => state.get(i.id)!.status === 'open' && BigInt(i.amount_atomic) - state.get(i.id)!.paid === step.value);
          if (open.length === 1) apply(open[0], step.value, 0n);
        }
      }
      for (const inv of invoices) {
        const now = await invoice(inv.id);
        expect({ id: inv.id, paid: now.amount_paid_atomic, status: now.status }, `seed ${seed}`).toEqual({ id: inv.id, paid: state.get(inv.id)!.paid.toString(), status: state.get(inv.id)!.status });
      }
      const { rows } = await fx.api.pool.query(`select 1 from payments where lower(to_address) = lower($1) and kind = 'transfer' and amount_atomic = 0`, [to]);
      expect(rows).toHaveLength(0);
    }, 120_000);
  }
});

describe('what an independent review found after the fixes', () => {
  const partialDeliveries = async (invId: string) =>
    (await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where invoice_id = $1 and kind = 'partial_payment'`, [invId])).rows[0].n;

  it('proxy calls that move nothing, naming an open invoice\'s reference, make no row, no event and no email; one atomic unit counts but announces nothing', async () => {
    const inv = await sentInvoice('100.00');
    const zeroBefore = await ignoredCount('zero_value');
    let last = 0n;
    for (let i = 0; i < 5; i++) last = (await payCrafted(inv, 0n, 0n, ZERO, chain.payers[5].address)).blockNumber;
    const unit = await payCrafted(inv, 1n, 0n, ZERO, chain.payers[5].address);
    await confirmedPast(unit.blockNumber > last ? unit.blockNumber : last);
    await waitUntil(async () => (await paymentsOf(inv.id)).some((p) => p.status === 'confirmed'), STATE_MS);
    // Only the unit's row: the five zero calls are counted as ignored, nothing else.
    expect(await paymentsOf(inv.id)).toEqual([expect.objectContaining({ tx_hash: unit.txHash, outcome: 'applied', counted_atomic: '1' })]);
    expect((await ignoredCount('zero_value')) - zeroBefore).toBe(5);
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '1' });
    // Dust toward an invoice announces nothing: no invoice.partially_paid, no acknowledgement owed.
    expect(await eventCounts(inv.id)).not.toHaveProperty('invoice.partially_paid');
    expect(await partialDeliveries(inv.id)).toBe(0);
  });

  it('a plain transfer of exactly a checkout\'s amount does not pay the checkout (anyone can open one for any amount): it stays unmatched', async () => {
    const link = await api.post('/v1/payment-links', key(), { name: 'Front-run jar', type: 'custom_amount', currency: 'USDC', network: 'local', min_amount: '1', max_amount: '500' });
    expect(link.status, link.raw).toBe(200);
    const origin = fixture!.origin!;
    const res = await fetch(`${origin}/pay/${link.body.data.id}/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', origin, 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ amount: '77.77', customer_email: 'front-runner@example.test' }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const { rows } = await fx.api.pool.query<{ id: string }>('select id from invoices where payment_link_id = $1', [link.body.data.id]);
    expect(rows).toHaveLength(1);
    const sent = await chain.transfer({ from: chain.payers[5].address, to: merchant, amountAtomic: 77_770_000n });
    await confirmedPast(sent.blockNumber);
    await waitUntil(async () => (await rowsOfTx(sent.txHash)).some((r) => r.status === 'confirmed'), STATE_MS);
    expect(await rowsOfTx(sent.txHash)).toEqual([expect.objectContaining({ invoice_id: null, status: 'confirmed' })]);
    expect(await invoice(rows[0].id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
  });

  it("another tenant cannot claim an address a tenant's invoices were ever sent to, even once they are all paid and it moved on", async () => {
    // An address of its own for this test: only this invoice is ever sent to it.
    const former = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', key(), { settlement_address: former })).status).toBe(200);
    try {
      const inv = await sentInvoice('2.00');
      const pi = inv.payment_instructions;
      expect(pi.to).toBe(former);
      const paid = await chain.payWithReference({ to: pi.to, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
      await confirmedPast(paid.blockNumber);
      await waitUntil(async () => (await invoice(inv.id)).status === 'paid', STATE_MS);
      // The tenant moves on: the former address is now only on its paid invoice.
      expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
      const other = await provisionMerchant(fx.api.pool, { id: newId('acct'), name: 'Claimant Ltd', email: null });
      const claim = await api.patch('/v1/account', other.keys.sandbox, { settlement_address: former });
      expect(claim.status, claim.raw).toBe(409);
      expect(claim.body.error).toMatchObject({ code: 'settlement_address_taken' });
    } finally {
      expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
    }
  });
});
