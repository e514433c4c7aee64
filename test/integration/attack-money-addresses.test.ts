// Attacks on "paid means paid" through the settlement address an invoice is paid to (an attack
// helper's findings): a payer following the payment page of an invoice sent without an address, a
// second tenant claiming an address while a send that read it is in flight, and the merchant
// transferring to itself. Each asserts the rule: an invoice counts only value that reached its own
// merchant's address, and the address it tells a payer to pay is one that pays it.
// A real chain (anvil), the API and a worker watching it; states are waited for, never a clock.
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let chain: TestChain;
let fx: ApiFixture;
let fixture: ChainFixture | undefined;
const api = apiClient(() => fx.api.app);
const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;
const STATE_MS = 30_000;

beforeAll(async () => {
  fixture = await startChainFixture({ settlementAddress: freshAddress() });
  ({ chain, fx } = fixture);
}, 120_000);
afterAll(async () => {
  await fixture?.close();
});

async function newMerchant(name: string): Promise<string> {
  const m = await provisionMerchant(fx.api.pool, { id: newId('acct'), name, email: null });
  return m.keys.sandbox;
}

async function draft(key: string, amount: string): Promise<JsonBody> {
  const created = await api.post('/v1/invoices', key, { customer_email: `payer-${Math.random().toString(36).slice(2)}@example.test`, amount, network: 'local', currency: 'USDC' });
  expect(created.status, created.raw).toBe(200);
  return created.body.data;
}

async function send(key: string, id: string): Promise<JsonBody> {
  const sent = await api.post(`/v1/invoices/${id}/send`, key);
  expect(sent.status, sent.raw).toBe(200);
  return sent.body.data;
}

describe('the payment page of an invoice sent before its merchant had a settlement address', () => {
  // Found by an attack: the page offered the account's current address (an EIP-681 request and
  // "send exactly ... to ..."), which no transfer could pay (the invoice has no address to match).
  it('offers no address to pay, and the merchant\'s later address is not on it: following it cannot lose the payer\'s money', async () => {
    const key = await newMerchant('Late Address Ltd');
    const inv = await send(key, (await draft(key, '10.00')).id);
    // Sent with no address: no instructions, no reference (docs/payments.md).
    expect(inv.payment_instructions).toBeNull();
    const settlement = freshAddress();
    const set = await api.patch('/v1/account', key, { settlement_address: settlement });
    expect(set.status, set.raw).toBe(200);

    const page = await fx.api.app.inject({ method: 'GET', url: `/pay/${inv.reference}` });
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toContain('ethereum:');
    expect(page.body).not.toContain('id="transfer-help"');
    expect(page.body.toLowerCase()).not.toContain(settlement.toLowerCase());
    expect(page.body).toContain('No settlement address was set when this invoice was sent');
    // The API says the same: nothing to pay to.
    expect((await api.get(`/v1/invoices/${inv.id}`, key)).body.data.payment_instructions).toBeNull();
  }, 90_000);
});

describe('a second tenant claiming an address while a send that read it is in flight', () => {
  /** Whether another session waits on a lock in a statement naming `table`. */
  const waitsOn = async (table: string) =>
    (await fx.api.pool.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like $1 and pid <> pg_backend_pid()`, [`%${table}%`])).rows.length > 0;

  // Found by an attack: A's send read x, A moved to y and B claimed x before the send committed
  // (neither A's row nor a committed invoice named x any more), so A's invoice was issued to B's
  // address, and B's wallet paid A's invoice.
  it('the merchant\'s move waits for the send that read its address, so the other tenant\'s claim of it is refused (409): the invoice is paid to its own merchant\'s address only', async () => {
    const keyA = await newMerchant('Mover Ltd');
    const keyB = await newMerchant('Claimant Ltd');
    const accountA = (await api.get('/v1/account', keyA)).body.data.id as string;
    const x = freshAddress();
    const y = freshAddress();
    expect((await api.patch('/v1/account', keyA, { settlement_address: x })).status).toBe(200);
    const d = await draft(keyA, '7.00');

    // A's send of d reads A's address (x), then takes A's invoice number: hold that number's row so
    // the send waits there, after it read x.
    const holder = await fx.api.pool.connect();
    let sending: Promise<Awaited<ReturnType<typeof api.post>>> | undefined;
    let moving: Promise<Awaited<ReturnType<typeof api.patch>>> | undefined;
    let claim: Awaited<ReturnType<typeof api.patch>> | undefined;
    try {
      await holder.query('begin');
      await holder.query(`insert into invoice_counters (account_id, environment, last_number) values ($1, 'sandbox', 0)`, [accountA]);
      sending = api.post(`/v1/invoices/${d.id}/send`, keyA);
      await waitUntil(() => waitsOn('invoice_counters'), STATE_MS);
      // Meanwhile A moves to y: it waits for the send (or, unlocked, is done at once).
      let moved = false;
      moving = api.patch('/v1/account', keyA, { settlement_address: y }).finally(() => (moved = true));
      await waitUntil(async () => moved || (await waitsOn('settlement_addresses')), STATE_MS);
      expect(moved).toBe(false);
      // B claims x, which A's row still names.
      claim = await api.patch('/v1/account', keyB, { settlement_address: x });
    } finally {
      await holder.query('commit').catch(() => undefined);
      holder.release();
    }
    const sent = await sending;
    expect(sent.status, sent.raw).toBe(200);
    expect((await moving).status).toBe(200);
    expect(claim.status, claim.raw).toBe(409);
    expect(claim.body.error).toMatchObject({ code: 'settlement_address_taken' });
    expect(sent.body.data.payment_instructions.to.toLowerCase()).toBe(x.toLowerCase());
    // Afterwards too, x stays A's: an invoice of A was sent to it.
    expect((await api.patch('/v1/account', keyB, { settlement_address: x })).status).toBe(409);
    expect((await api.get('/v1/account', keyA)).body.data.settlement_address.toLowerCase()).toBe(y.toLowerCase());
  }, 90_000);
});

describe("the merchant paying its own settlement address from itself", () => {
  // Found by an attack: a Transfer from the settlement address to itself paid the invoice in full.
  it('a plain transfer to itself moves no value to the merchant: no payment, the invoice stays open (no receipt, no invoice.paid)', async () => {
    const key = await newMerchant('Self Dealer Ltd');
    // A funded, unlocked account of the node is this merchant's settlement address.
    const self = chain.payers[chain.payers.length - 1].address;
    expect((await api.patch('/v1/account', key, { settlement_address: self })).status).toBe(200);
    const inv = await send(key, (await draft(key, '25.00')).id);
    expect(inv.payment_instructions.to).toBe(self);
    const before = await chain.balanceOf(self);
    const moved = await chain.transfer({ from: self, to: self, amountAtomic: 25_000_000n });
    // Nothing reached the merchant: its balance is what it was.
    expect(await chain.balanceOf(self)).toBe(before);
    await scannedPast(moved.blockNumber);
    expect((await fx.api.pool.query('select 1 from payments where tx_hash = $1', [moved.txHash])).rows).toEqual([]);
    const after = (await api.get(`/v1/invoices/${inv.id}`, key)).body.data;
    expect(after).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
    expect(await eventTypes(inv.id)).not.toContain('invoice.paid');
  }, 90_000);

  it('through the fee proxy from itself: only the fee moved (to the platform), so only the fee counts; the invoice stays open', async () => {
    const key = await newMerchant('Self Proxy Ltd');
    const self = chain.payers[chain.payers.length - 2].address;
    expect((await api.patch('/v1/account', key, { settlement_address: self })).status).toBe(200);
    const inv = await send(key, (await draft(key, '25.00')).id);
    const pi = inv.payment_instructions;
    const paid = await chain.payWithReference({ from: self, to: self, amountAtomic: BigInt(pi.amount_atomic), feeAtomic: BigInt(pi.fee_atomic), reference: pi.payment_reference });
    await scannedPast(paid.blockNumber);
    const after = (await api.get(`/v1/invoices/${inv.id}`, key)).body.data;
    expect(after).toMatchObject({ status: 'open', amount_paid_atomic: pi.fee_atomic });
    expect(await eventTypes(inv.id)).not.toContain('invoice.paid');
  }, 90_000);
});

/** Mines the confirmations and waits until the worker's cursor passed `block`: everything in it is recorded for good. */
async function scannedPast(block: bigint): Promise<void> {
  await chain.mine(3);
  await waitUntil(async () => {
    const { rows } = await fx.api.pool.query<{ block_number: string }>('select block_number::text from chain_cursors where chain_id = $1', [chain.chainId]);
    return rows[0] !== undefined && BigInt(rows[0].block_number) >= block;
  }, STATE_MS);
}

async function eventTypes(objectId: string): Promise<string[]> {
  return (await fx.api.pool.query<{ type: string }>('select type from events where object_id = $1', [objectId])).rows.map((r) => r.type);
}
