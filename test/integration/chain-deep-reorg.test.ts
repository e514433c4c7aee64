// Deep reorgs on a real chain (anvil, the fee proxy, the test USDC), issue 25 "deep reorgs
// tested": the rewind paths of the watcher (src/chain/watcher.ts) and rewindCursor
// (src/chain/detector.ts) that the shallow pending-window reorg never reaches:
// - the node's head behind the cursor after evm_revert past the safe head, the newest checkpoint it
//   has changed: rewound to the fork point found by hash, not taken for a lagging node;
// - a reorg past every checkpoint (evm_revert, then more blocks than the cursor covered): rewound
//   to the start block and everything rescanned, the payments below the fork counted once still;
// - anvil_rollback below the cursor and a new payment mined at the same heights;
// - anvil_reorg deeper than the confirmations, below the cursor.
// After each, every payment and every invoice of the chain is checked against the chain itself
// (`expectLedger`): a payment whose transaction is on the chain at or below the cursor is
// confirmed in that very block, one whose transaction is gone is removed (reorged out when it had
// been confirmed), and each invoice's amount_paid_atomic is what its confirmed payments counted.
// The watcher is run by hand (no worker in the background), so every state is one the test made.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Address, Hash, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import { createChainWatcher } from '../../src/chain/watcher.js';
import { createLogger } from '../../src/log.js';
import { startTestChain, type TestChain } from '../helpers/anvil.js';
import { sendLocalInvoice } from '../helpers/chain-fixture.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient, type JsonBody } from '../helpers/http.js';

let chain: TestChain;
let fx: ApiFixture;
let file: string;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;
const merchant = privateKeyToAccount(generatePrivateKey()).address;
/** The chains file's confirmations (the local chain's). */
const CONFIRMATIONS = 2n;

beforeAll(async () => {
  chain = await startTestChain();
  file = chain.writeChainsFile(mkdtempSync(path.join(tmpdir(), 'chain-deep-reorg-')));
  fx = await startApiFixture({ CHAINS_FILE: file, RATE_LIMIT_MAX: '1000000' });
  expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
  await chain.mine(5);
}, 120_000);
afterAll(async () => {
  await fx?.close();
  await chain?.stop();
});

/**
 * A watcher of the test chain. `maxBlocks: 1` makes one range, and so one checkpoint, per block:
 * the 32 checkpoints then cover only the last 32 blocks, which a test can reorg past.
 */
function watcher(maxBlocks: number) {
  const w = createChainWatcher({ pool: fx.api.pool, chains: loadChains(file, {}), maxBlocks, log: createLogger('silent'), rangesPerRun: 1000 });
  return () => w.run(chain.chainId);
}

async function cursor(): Promise<{ block: bigint; checkpoints: [string, string][] }> {
  const { rows } = await fx.api.pool.query<{ block_number: string; checkpoints: [string, string][] | null }>(
    'select block_number::text, checkpoints from chain_cursors where chain_id = $1',
    [chain.chainId],
  );
  return rows[0] ? { block: BigInt(rows[0].block_number), checkpoints: rows[0].checkpoints ?? [] } : { block: -1n, checkpoints: [] };
}

/** Runs until the cursor reaches the safe head of the chain as it is now (bounded); returns the outcomes. */
async function catchUp(run: () => Promise<string>): Promise<string[]> {
  const safe = (await chain.publicClient.getBlockNumber()) - CONFIRMATIONS;
  const outcomes: string[] = [];
  for (let i = 0; i < 20 && (await cursor()).block < safe; i++) outcomes.push(await run());
  expect((await cursor()).block, outcomes.slice(-3).join(' | ')).toBeGreaterThanOrEqual(safe);
  return outcomes;
}

const sentInvoice = (amount: string): Promise<JsonBody> => sendLocalInvoice(api, key(), amount);

/** Pays through the proxy: the whole invoice, or `amountAtomic` of it with no fee (a partial payment). */
async function pay(inv: JsonBody, amountAtomic?: bigint): Promise<Hash> {
  const pi = inv.payment_instructions;
  const whole = amountAtomic === undefined;
  const paid = await chain.payWithReference({
    to: pi.to,
    amountAtomic: whole ? BigInt(pi.amount_atomic) : amountAtomic,
    feeAtomic: whole ? BigInt(pi.fee_atomic) : 0n,
    reference: pi.payment_reference,
  });
  return paid.txHash;
}

const invoice = async (id: string): Promise<JsonBody> => (await api.get(`/v1/invoices/${id}`, key())).body.data;
const paymentsOf = async (id: string): Promise<JsonBody[]> => (await api.get(`/v1/invoices/${id}/payments`, key())).body.data as JsonBody[];

async function eventTypes(objectId: string): Promise<string[]> {
  const { rows } = await fx.api.pool.query<{ type: string }>('select type from events where object_id = $1 order by created_at, id', [objectId]);
  return rows.map((r) => r.type);
}

/** A JSON-RPC method viem's test actions do not name. */
const rpc = (method: string, params: unknown[]): Promise<unknown> =>
  (chain.publicClient.request as (args: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params });

interface PaymentRow {
  id: string;
  tx_hash: Hash;
  status: string;
  outcome: string | null;
  invoice_id: string | null;
  block_number: string;
  block_hash: string;
  counted_atomic: string | null;
  received_atomic: string | null;
  reorged_out: boolean;
  confirmed_before: boolean;
}

/**
 * Every payment and invoice of the chain against the chain as it is now: a transaction on the
 * chain at or below the cursor is its payment confirmed in that block; one no longer on the chain
 * recorded at or below the cursor is a removed payment (reorged out when it had been confirmed),
 * above it a pending one is gone already (the pending window is re-read each run); an invoice's
 * amount_paid_atomic is what its confirmed, applied payments counted, and an invoice paid in full
 * by them is paid. Returns the rows, for the test's own expectations.
 */
async function expectLedger(): Promise<PaymentRow[]> {
  const at = (await cursor()).block;
  const { rows } = await fx.api.pool.query<PaymentRow>(
    `select id, tx_hash, status, outcome, invoice_id, block_number::text, block_hash, counted_atomic::text, received_atomic::text,
            reorged_out_at is not null as reorged_out, confirmed_at is not null as confirmed_before
       from payments where chain_id = $1 order by block_number, log_index`,
    [chain.chainId],
  );
  for (const p of rows) {
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: p.tx_hash }).catch(() => null);
    const where = `payment ${p.id} (tx ${p.tx_hash})`;
    if (receipt === null && BigInt(p.block_number) <= at) {
      expect(p.status, `${where} is not on the chain`).toBe('removed');
      expect(p.reorged_out, `${where}: reorged out exactly when it had been confirmed`).toBe(p.confirmed_before);
    } else if (receipt === null) {
      // Gone, in a block the new chain has not confirmed yet: decided once the cursor passes it
      // (a confirmed payment is reorged out by final blocks only, as it was confirmed by them).
      expect(p.status, `${where} is above the cursor`).not.toBe('pending');
    } else if (receipt.blockNumber <= at) {
      expect({ status: p.status, block: p.block_number, hash: p.block_hash }, `${where} is at block ${receipt.blockNumber}`).toEqual({
        status: 'confirmed',
        block: receipt.blockNumber.toString(),
        hash: receipt.blockHash,
      });
    } else {
      expect(p.status, `${where} is above the cursor`).not.toBe('removed');
    }
  }
  const { rows: invoices } = await fx.api.pool.query<{ id: string; status: string; amount_atomic: string; amount_paid_atomic: string; fee_counted_atomic: string }>(
    `select id, status::text, amount_atomic::text, amount_paid_atomic::text, fee_counted_atomic::text from invoices where chain_id = $1 and status <> 'draft'`,
    [chain.chainId],
  );
  for (const inv of invoices) {
    const applied = rows.filter((p) => p.invoice_id === inv.id && p.status === 'confirmed' && p.outcome === 'applied');
    const counted = applied.reduce((sum, p) => sum + BigInt(p.counted_atomic ?? '0'), 0n);
    expect(BigInt(inv.amount_paid_atomic), `invoice ${inv.id}: what its confirmed payments counted`).toBe(counted);
    // And of the fee: what each counted beyond what reached the merchant (the next instructions' room).
    const fee = applied.reduce((sum, p) => {
      const c = BigInt(p.counted_atomic ?? '0');
      const r = BigInt(p.received_atomic ?? '0');
      return sum + c - (r < c ? r : c);
    }, 0n);
    expect(BigInt(inv.fee_counted_atomic), `invoice ${inv.id}: the fee its confirmed payments counted`).toBe(fee);
    if (counted >= BigInt(inv.amount_atomic)) expect(inv.status, `invoice ${inv.id} is paid in full`).toBe('paid');
    // The API shows the same.
    expect((await invoice(inv.id)).amount_paid_atomic).toBe(inv.amount_paid_atomic);
  }
  return rows;
}

describe('deep reorgs rewind the cursor and leave every payment and invoice as the chain says', () => {
  it('evm_revert past the safe head with the node behind the cursor: rewound to the fork point by hash, both payments reorged out, then paid again', async () => {
    const run = watcher(1);
    await catchUp(run);
    const full = await sentInvoice('5.00');
    const partial = await sentInvoice('8.00');
    const snapshot = await chain.snapshot();
    const forkAt = await chain.publicClient.getBlockNumber();
    const fullTx = await pay(full);
    const partialTx = await pay(partial, 3_000_000n);
    await chain.mine(6);
    await catchUp(run);
    expect((await invoice(full.id)).status).toBe('paid');
    expect(await invoice(partial.id)).toMatchObject({ status: 'open', amount_paid_atomic: '3000000' });
    await expectLedger();
    const before = await cursor();

    // Back past the safe head, then two blocks: the node is behind the cursor, and the newest
    // checkpoint it has is another block now (not a node that lags).
    await chain.revert(snapshot);
    await chain.mine(2);
    const head = await chain.publicClient.getBlockNumber();
    expect(head).toBeLessThan(before.block);
    const outcome = await run();
    expect(outcome).toMatch(/after a reorg \(rewound to \d+\)/);
    const back = BigInt(/rewound to (\d+)/.exec(outcome)![1]);
    expect(back).toBeLessThanOrEqual(forkAt);
    expect(back).toBeGreaterThanOrEqual(forkAt - 2n);

    await expectLedger();
    // The new chain's blocks where the payments were become final: they are reorged out.
    await chain.mine(4);
    await catchUp(run);
    const rows = await expectLedger();
    for (const tx of [fullTx, partialTx]) expect(rows.find((r) => r.tx_hash === tx)).toMatchObject({ status: 'removed', reorged_out: true });
    // A paid invoice stays paid (its receipt went out); what the reorged-out payment counted is off it.
    expect(await invoice(full.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });
    expect(await invoice(partial.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0', amount_remaining_atomic: '8000000' });
    expect(await eventTypes((await paymentsOf(partial.id))[0].id as string)).toContain('payment.reorged_out');

    // Paid again on the new chain: counted once, and the partial invoice is paid in full.
    await pay(partial, 3_000_000n);
    await pay(partial, 5_000_000n);
    await chain.mine(3);
    await catchUp(run);
    expect(await invoice(partial.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '8000000' });
    await expectLedger();
  });

  it('a reorg past every checkpoint: the cursor goes back to the start block, and a rescan of the whole chain counts what is still there once', async () => {
    const run = watcher(1);
    await catchUp(run);
    // Below the fork: paid, and it must stay exactly as it is through the whole rescan.
    const kept = await sentInvoice('2.00');
    const keptTx = await pay(kept);
    await chain.mine(3);
    await catchUp(run);
    expect((await invoice(kept.id)).status).toBe('paid');
    const keptEvents = await eventTypes(kept.id);

    const snapshot = await chain.snapshot();
    const forkAt = await chain.publicClient.getBlockNumber();
    const lost = await sentInvoice('4.00');
    const lostTx = await pay(lost);
    // More blocks than the checkpoints cover, one range (one checkpoint) each.
    await chain.mine(40);
    await catchUp(run);
    expect((await invoice(lost.id)).status).toBe('paid');
    const covered = await cursor();
    expect(covered.checkpoints).toHaveLength(32);
    expect(BigInt(covered.checkpoints[0][0])).toBeGreaterThan(forkAt + 1n);

    // Another chain from the fork, longer than the cursor: no checkpoint is on it.
    await chain.revert(snapshot);
    await chain.mine(Number(covered.block - forkAt) + 5);
    const outcome = await run();
    expect(outcome).toMatch(/after a reorg \(rewound to -1\)/);
    // The rescan from the start, in wide ranges.
    await catchUp(watcher(2000));

    const rows = await expectLedger();
    expect(rows.find((r) => r.tx_hash === lostTx)).toMatchObject({ status: 'removed', reorged_out: true });
    expect(rows.filter((r) => r.tx_hash === keptTx)).toEqual([expect.objectContaining({ status: 'confirmed', reorged_out: false })]);
    expect(await invoice(kept.id)).toMatchObject({ status: 'paid', amount_paid_atomic: kept.amount_atomic });
    // Nothing announced twice for what was only read again.
    expect(await eventTypes(kept.id)).toEqual(keptEvents);
    expect(await invoice(lost.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });
  });

  // Found by a review: the rescan asked for transfers to the addresses watched now only, so a
  // payment to the merchant's former address, still on the chain, was reorged out for being unasked.
  it('a reorg past every checkpoint after the merchant moved to another address: a plain transfer to the old one, still on the chain, stays counted', async () => {
    const run = watcher(1);
    await catchUp(run);
    const kept = await sentInvoice('3.00');
    const keptTx = (await chain.transfer({ to: merchant as Address, amountAtomic: BigInt(kept.amount_atomic) })).txHash;
    await chain.mine(3);
    await catchUp(run);
    expect(await invoice(kept.id)).toMatchObject({ status: 'paid', amount_paid_atomic: kept.amount_atomic });
    const keptEvents = await eventTypes(kept.id);
    const moved = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', key(), { settlement_address: moved })).status).toBe(200);
    try {
      const snapshot = await chain.snapshot();
      const forkAt = await chain.publicClient.getBlockNumber();
      await chain.mine(40);
      await catchUp(run);
      const covered = await cursor();
      expect(BigInt(covered.checkpoints[0][0])).toBeGreaterThan(forkAt + 1n);
      await chain.revert(snapshot);
      await chain.mine(Number(covered.block - forkAt) + 5);
      expect(await run()).toMatch(/after a reorg \(rewound to -1\)/);
      await catchUp(watcher(2000));
      const rows = await expectLedger();
      expect(rows.filter((r) => r.tx_hash === keptTx)).toEqual([expect.objectContaining({ status: 'confirmed', reorged_out: false })]);
      expect(await invoice(kept.id)).toMatchObject({ status: 'paid', amount_paid_atomic: kept.amount_atomic });
      expect(await eventTypes(kept.id)).toEqual(keptEvents);
    } finally {
      expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
    }
  });

  it('anvil_rollback below the cursor and another payment at the same heights: the old one reorged out, the new one counted', async () => {
    const run = watcher(2000);
    await catchUp(run);
    const inv = await sentInvoice('6.00');
    const firstTx = await pay(inv, 2_000_000n);
    await chain.mine(4);
    await catchUp(run);
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '2000000' });
    const firstBlock = (await chain.publicClient.getTransactionReceipt({ hash: firstTx })).blockNumber;

    // Roll the chain back to just below that payment (its approve stays), then a different payment.
    const head = await chain.publicClient.getBlockNumber();
    await rpc('anvil_rollback', [Number(head - firstBlock + 1n)]);
    const secondTx = await pay(inv, 1_500_000n);
    await chain.mine(6);
    const outcome = await run();
    expect(outcome).toMatch(/after a reorg \(rewound to \d+\)/);
    await catchUp(run);

    const rows = await expectLedger();
    // anvil drops a rolled-back block's transactions: the first payment is gone for good.
    expect(await chain.publicClient.getTransactionReceipt({ hash: firstTx }).catch(() => null)).toBeNull();
    expect(rows.find((r) => r.tx_hash === firstTx)).toMatchObject({ status: 'removed', reorged_out: true });
    expect(rows.find((r) => r.tx_hash === secondTx)).toMatchObject({ status: 'confirmed', block_number: firstBlock.toString() });
    expect(await invoice(inv.id)).toMatchObject({ status: 'open', amount_paid_atomic: '1500000', amount_remaining_atomic: '4500000' });
  });

  it('anvil_reorg deeper than the confirmations, below the cursor: the payment in the replaced blocks is reorged out and the invoice shows what remains', async () => {
    const run = watcher(1);
    await catchUp(run);
    const inv = await sentInvoice('3.00');
    const tx = await pay(inv);
    await chain.mine(4);
    await catchUp(run);
    expect((await invoice(inv.id)).status).toBe('paid');
    const block = (await chain.publicClient.getTransactionReceipt({ hash: tx })).blockNumber;
    const head = await chain.publicClient.getBlockNumber();

    // Replaces every block from the payment's up: the same height, other hashes, no payment.
    await chain.reorg(Number(head - block + 1n));
    await chain.mine(1);
    const outcome = await run();
    expect(outcome).toMatch(/after a reorg \(rewound to \d+\)/);
    expect(BigInt(/rewound to (\d+)/.exec(outcome)![1])).toBeLessThan(block);
    await catchUp(run);

    const rows = await expectLedger();
    // anvil_reorg with no transactions of its own drops those of the replaced blocks.
    expect(await chain.publicClient.getTransactionReceipt({ hash: tx }).catch(() => null)).toBeNull();
    const p = rows.find((r) => r.tx_hash === tx);
    expect(p).toMatchObject({ status: 'removed', reorged_out: true });
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });
    expect(await eventTypes(p!.id)).toContain('payment.reorged_out');
  });
});

async function paymentOf(txHash: Hash) {
  const { rows } = await fx.api.pool.query<{ status: string; outcome: string | null; invoice_id: string | null; reorged_out: boolean; counted_atomic: string | null; block_number: string }>(
    `select status, outcome, invoice_id, reorged_out_at is not null as reorged_out, counted_atomic::text, block_number::text from payments where tx_hash = $1`,
    [txHash.toLowerCase()],
  );
  return rows;
}

// A plain transfer that paid an invoice, reorged out, then broadcast again and included in a later
// block (found by an adversarial review): it came back 'unmatched' with no invoice (a plain
// transfer matched only open invoices owing its value, and the one it had paid stayed paid), and
// once the merchant had moved to another address it stayed 'removed' (nothing asked for transfers
// to the old one). The detector restores it to the invoice it had counted toward
// (lockPayableInvoices' restoredTo); the watcher asks for the recipients of payments reorged out in
// the last day (recipientsToRescan). Last in the file: each case moves the account's address.
describe('a deep-reorged plain transfer, included again later', () => {
  it('counts again toward the invoice it paid (which stayed paid)', () => reincluded({ move: false, rival: false }), 120_000);
  it('the same after the merchant moved off the address: the transfer is asked for again', () => reincluded({ move: true, rival: false }), 120_000);
  it('toward the invoice it paid, not another open invoice at that address owing the same amount', () => reincluded({ move: false, rival: true }), 120_000);
});

async function reincluded({ move, rival }: { move: boolean; rival: boolean }): Promise<void> {
  {
    // A fresh address per case, so the two cases share nothing but the chain.
    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', key(), { settlement_address: merchant })).status).toBe(200);
    const run = watcher(1);
    await catchUp(run);
    const inv = await sendLocalInvoice(api, key(), '3.00');
    const snapshot = await chain.snapshot();
    const forkAt = await chain.publicClient.getBlockNumber();
    const paid = await chain.transfer({ to: merchant as Address, amountAtomic: BigInt(inv.amount_atomic) });
    const raw = (await rpc('eth_getRawTransactionByHash', [paid.txHash])) as Hex;
    expect(raw).toMatch(/^0x/);
    await chain.mine(40);
    await catchUp(run);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '3000000' });
    const covered = await cursor();

    // The merchant moves to another address; no open invoice names the old one.
    const moved = privateKeyToAccount(generatePrivateKey()).address;
    if (move) expect((await api.patch('/v1/account', key(), { settlement_address: moved })).status).toBe(200);

    // A reorg past every checkpoint: a chain from the fork without the transfer, longer than the cursor.
    await chain.revert(snapshot);
    await chain.mine(Number(covered.block - forkAt) + 5);
    expect(await run()).toMatch(/after a reorg \(rewound to -1\)/);
    await catchUp(watcher(2000));
    expect(await paymentOf(paid.txHash)).toEqual([expect.objectContaining({ status: 'removed', reorged_out: true })]);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '0' });

    // Another invoice of the same amount to the same address, open: a plain transfer of that value would pay it.
    const other = rival ? await sendLocalInvoice(api, key(), '3.00') : null;

    // The payer's signed transaction is broadcast again and included on the new chain.
    const before = await chain.balanceOf(merchant as Address);
    const again = (await rpc('eth_sendRawTransaction', [raw])) as Hash;
    expect(again.toLowerCase()).toBe(paid.txHash.toLowerCase());
    await chain.mine(1);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: paid.txHash });
    expect(receipt.status).toBe('success');
    expect(await chain.balanceOf(merchant as Address)).toBe(before + 3_000_000n);
    await chain.mine(4);
    await catchUp(watcher(2000));

    // The money is at the merchant's (former) address again: the payment counts again.
    expect(await paymentOf(paid.txHash)).toEqual([
      expect.objectContaining({ status: 'confirmed', reorged_out: false, block_number: receipt.blockNumber.toString(), outcome: 'applied', invoice_id: inv.id, counted_atomic: '3000000' }),
    ]);
    expect(await invoice(inv.id)).toMatchObject({ status: 'paid', amount_paid_atomic: '3000000' });
    if (other) expect(await invoice(other.id)).toMatchObject({ status: 'open', amount_paid_atomic: '0' });
  }
}
