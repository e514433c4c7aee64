// Confirmed payments seen again in another block after a reorg deeper than the confirmations, on
// a simulated chain driving the detector as the watcher does (one run per block: rewind on a
// changed cursor block, the final range, then the pending window), on real Postgres. Found by a
// review of the re-inclusion rules (observed_digest, 14b0443):
// - a row is never moved in the pending window: moved onto a block a shallow reorg then dropped,
//   it kept counting with no rescan left to look at it;
// - a row from before observed_digest, re-included saying the same, keeps what it counted, a
//   payment the merchant applied by hand included (the restore would have matched it by its
//   kind's rule and lost the application).
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordRange, rewindCursor } from '../../src/chain/detector.js';
import { observePayments } from '../../src/chain/observe.js';
import type { TransferLog } from '../../src/chain/kinds/kind.js';
import type { ProxyLog } from '../../src/chain/kinds/proxy.js';
import { findCursor, forgetHead } from '../../src/db/payments.js';
import { applyUnmatchedPayment } from '../../src/invoicing/apply-payment.js';
import { keccak256, toHex } from 'viem';
import type { Chain } from '../../src/domain/chains.js';
import type { ApiFixture } from '../helpers/context.js';
import { SIMULATED_CHAIN, startSimulatedChainFixture } from '../helpers/simulated-chain.js';
import { apiClient } from '../helpers/http.js';

const { token: TOKEN, feeAddress: FEE, payer: PAYER } = SIMULATED_CHAIN;
const CONFIRMATIONS = 2;

let fx: ApiFixture;
let chain: Chain;
const api = apiClient(() => fx.api.app);

beforeAll(async () => {
  ({ fx, chain } = await startSimulatedChainFixture('chain-reorg-moves'));
}, 60_000);
afterAll(async () => {
  await fx?.close();
});

type Step = { topic: string; to: string; amount: bigint; fee: bigint };
interface Tx {
  hash: string;
  steps: Step[];
}
interface Block {
  number: bigint;
  hash: string;
  txs: Tx[];
}
let n = 0;
const h = () => `0x${(++n).toString(16).padStart(64, '0')}`;
const blocks: Block[] = [{ number: 0n, hash: h(), txs: [] }];
const passed = new Map<bigint, string>();
const push = (txs: Tx[] = []) => blocks.push({ number: BigInt(blocks.length), hash: h(), txs });

function read(from: bigint, to: bigint, merchant: string) {
  const proxy: ProxyLog[] = [];
  const transfers: TransferLog[] = [];
  for (const b of blocks.slice(Number(from), Number(to) + 1)) {
    let i = 0;
    for (const tx of b.txs) {
      const at = () => ({ txHash: tx.hash, logIndex: i++, blockNumber: b.number, blockHash: b.hash, blockTimestamp: null });
      for (const s of tx.steps) {
        if (s.to.toLowerCase() === merchant.toLowerCase()) transfers.push({ ...at(), tokenAddress: TOKEN, from: PAYER, to: s.to, value: s.amount });
        transfers.push({ ...at(), tokenAddress: TOKEN, from: PAYER, to: FEE, value: s.fee });
        proxy.push({ ...at(), tokenAddress: TOKEN, to: s.to, amount: s.amount, referenceTopic: s.topic, feeAmount: s.fee, feeAddress: FEE });
      }
    }
  }
  return observePayments({ proxy, transfer: transfers }, FEE);
}

/** One watcher run (watcher.ts): rewind on a changed cursor block, forget a recorded head the chain lacks, final range, then pending window. */
async function run(merchant: string): Promise<void> {
  const head = BigInt(blocks.length - 1);
  const safe = head - BigInt(CONFIRMATIONS);
  const cursor = await findCursor(fx.api.pool, chain.chainId);
  let cur = cursor ? BigInt(cursor.block_number) : -1n;
  if (cursor?.block_hash && cur >= 0n && blocks[Number(cur)]?.hash !== cursor.block_hash) {
    let fork = cur - 1n;
    while (fork >= 0n && passed.get(fork) !== blocks[Number(fork)].hash) fork--;
    expect(await rewindCursor(fx.api.pool, chain, cur, { block: fork, hash: blocks[Number(fork)].hash, checkpoints: [] })).toBe(true);
    cur = fork;
  }
  if (cursor?.head_block && BigInt(cursor.head_block) > head) await forgetHead(fx.api.pool, chain.chainId);
  const times = new Map(blocks.map((b) => [b.number, new Date(1_700_000_000_000 + Number(b.number) * 1000)]));
  if (cur < safe) {
    const done = await recordRange(fx.api.pool, chain, {
      from: cur + 1n,
      to: safe,
      final: true,
      observed: read(cur + 1n, safe, merchant),
      blockTimes: times,
      head,
      safe,
      expectedCursor: cur,
      cursorTo: { block: safe, hash: blocks[Number(safe)].hash, time: times.get(safe)!, checkpoints: [] },
    });
    expect(done).not.toBeNull();
    for (let b = cur + 1n; b <= safe; b++) passed.set(b, blocks[Number(b)].hash);
    cur = safe;
  }
  await recordRange(fx.api.pool, chain, { from: cur + 1n, to: head, final: false, observed: read(cur + 1n, head, merchant), blockTimes: new Map(), head, safe, expectedCursor: cur });
}

describe('a confirmed payment seen again in another block', () => {
  it('moved into the pending window, then that block reorged away: stops counting once its transaction is gone from the chain', async () => {
    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: merchant })).status).toBe(200);
    const created = await api.post('/v1/invoices', fx.merchant.keys.sandbox, { customer_email: 'p@example.test', amount: '10.00', network: 'local', currency: 'USDC' });
    expect(created.status, created.raw).toBe(200);
    const id = created.body.data.id as string;
    expect((await api.post(`/v1/invoices/${id}/send`, fx.merchant.keys.sandbox)).status).toBe(200);
    const inv = (await fx.api.pool.query<{ amount_atomic: string; fee_atomic: string; payment_reference_topic: string }>(
      'select amount_atomic::text, fee_atomic::text, payment_reference_topic from invoices where id = $1',
      [id],
    )).rows[0];
    const pay: Tx = { hash: h(), steps: [{ topic: inv.payment_reference_topic, to: merchant, amount: BigInt(inv.amount_atomic) - BigInt(inv.fee_atomic), fee: BigInt(inv.fee_atomic) }] };
    const state = async () => {
      const i = (await fx.api.pool.query<{ status: string; paid: string }>('select status, amount_paid_atomic::text as paid from invoices where id = $1', [id])).rows[0];
      const p = (await fx.api.pool.query<{ status: string; block_number: string; counted: string | null }>(
        'select status, block_number::text, counted_atomic::text as counted from payments where tx_hash = $1',
        [pay.hash],
      )).rows;
      return { invoice: i, payments: p };
    };

    // Blocks 1..10 empty, the payment in 11, then 12 and 13: confirmed (safe head 11 = the cursor).
    for (let b = 1; b <= 10; b++) push();
    push([pay]);
    push();
    push();
    await run(merchant);
    expect((await state()).invoice).toEqual({ status: 'paid', paid: inv.amount_atomic });

    // A deep reorg at 10: the new chain is 11', 12' (shorter for now), the same transaction in 12'.
    blocks.splice(11);
    push();
    push([pay]);
    await run(merchant);

    // A shallow reorg of the pending block 12': the transaction is gone (its nonce spent otherwise).
    blocks.splice(12);
    push();
    push();
    await run(merchant); // head 13: final 11..11 (a rescan range), pending 12..13
    push();
    await run(merchant); // head 14: final 12..12 (above rescan_to 11)
    for (let k = 0; k < 4; k++) {
      push();
      await run(merchant);
    }
    const end = await state();
    expect(blocks.some((b) => b.txs.includes(pay))).toBe(false);
    // The rule: nothing counts from a transaction the chain no longer holds.
    expect(end.payments.filter((p) => p.status === 'confirmed'), 'confirmed payment rows of a transaction not on the chain').toEqual([]);
    expect(end.invoice.paid, 'amount_paid_atomic of an invoice whose only payment is not on the chain').toBe('0');
  }, 120_000);

  it('a payment the merchant applied by hand, confirmed before observed_digest existed, re-included unchanged elsewhere, keeps counting', async () => {
    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    expect((await api.patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: merchant })).status).toBe(200);
    const invoice = async () => {
      const created = await api.post('/v1/invoices', fx.merchant.keys.sandbox, { customer_email: 'q@example.test', amount: '10.00', network: 'local', currency: 'USDC' });
      expect(created.status, created.raw).toBe(200);
      expect((await api.post(`/v1/invoices/${created.body.data.id}/send`, fx.merchant.keys.sandbox)).status).toBe(200);
      return created.body.data.id as string;
    };
    const [legacyInv, freshInv] = [await invoice(), await invoice()];
    // Proxy payments naming a reference nobody has (a payer's typo): unmatched, then applied by the merchant.
    const q: Tx = { hash: h(), steps: [{ topic: keccak256(toHex('typo-1')), to: merchant, amount: 10_000_000n, fee: 0n }] };
    const r: Tx = { hash: h(), steps: [{ topic: keccak256(toHex('typo-2')), to: merchant, amount: 10_000_000n, fee: 0n }] };
    push();
    const b = blocks.length;
    push([q, r]);
    push();
    push();
    await run(merchant);
    const scope = { accountId: fx.merchant.accountId, environment: 'sandbox' as const };
    const idOf = async (tx: Tx) => (await fx.api.pool.query<{ id: string }>('select id from payments where tx_hash = $1', [tx.hash])).rows[0].id;
    await applyUnmatchedPayment(fx.api.pool, [chain], scope, await idOf(q), legacyInv);
    await applyUnmatchedPayment(fx.api.pool, [chain], scope, await idOf(r), freshInv);
    // q was confirmed before the column existed (the migration leaves it null).
    await fx.api.pool.query('update payments set observed_digest = null where tx_hash = $1', [q.hash]);
    const paid = async (id: string) => (await fx.api.pool.query<{ s: string }>('select amount_paid_atomic::text || \' \' || status as s from invoices where id = $1', [id])).rows[0].s;
    expect([await paid(legacyInv), await paid(freshInv)]).toEqual(['10000000 paid', '10000000 paid']);

    // A deep reorg from block b: the very same transactions, unchanged, one block later.
    blocks.splice(b);
    push();
    push([q, r]);
    for (let k = 0; k < 4; k++) push();
    await run(merchant);
    await run(merchant);
    const rows = (await fx.api.pool.query<{ tx_hash: string; status: string; outcome: string | null; invoice_id: string | null }>(
      'select tx_hash, status, outcome, invoice_id from payments where tx_hash = any($1) order by tx_hash',
      [[q.hash, r.hash]],
    )).rows;
    const events = (await fx.api.pool.query<{ type: string; n: number }>(
      `select type, count(*)::int as n from events where object_id = any($1) group by type order by type`,
      [await Promise.all([idOf(q), idOf(r)])],
    )).rows;
    // The log says exactly what it said: the merchant's application stands, as it does for the row
    // with a digest; both only moved (no reorged_out announced).
    expect({ legacy: await paid(legacyInv), fresh: await paid(freshInv) }).toEqual({ legacy: '10000000 paid', fresh: '10000000 paid' });
    expect(rows.map((r) => [r.status, r.outcome])).toEqual([['confirmed', 'applied'], ['confirmed', 'applied']]);
    expect(events.map((e) => e.type)).not.toContain('payment.reorged_out');
  }, 120_000);
});
