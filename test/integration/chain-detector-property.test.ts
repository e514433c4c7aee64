// Issue 24's property, on the real detector and Postgres (recordRange, rewindCursor) over a
// simulated chain, seeded (the seed is in each test's name): random blocks of proxy payments
// (random amounts and fees; fee addresses zero, the payer, the merchant, the platform's) and plain
// transfers (zero, dust, exact, ambiguous, random), scans as the watcher makes them (confirmed up to
// head - 2, pending above), and reorgs of random depth (shallow and deeper than the confirmations)
// that re-include some transactions in other blocks and at other log indexes and drop others. After
// each sequence, for every invoice: amount_paid_atomic is what its merchant received for it on the
// canonical chain plus the fees that reached the fee address, capped at its fee; nothing counts
// twice or from a transaction no longer on the chain; no invoice is paid for less than its
// merchant's part. (The end-to-end attacks on anvil are in chain-paid-means-paid.test.ts.)
import { keccak256, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordRange, rewindCursor } from '../../src/chain/detector.js';
import { observePayments } from '../../src/chain/observe.js';
import type { TransferLog } from '../../src/chain/kinds/kind.js';
import type { ProxyLog } from '../../src/chain/kinds/proxy.js';
import { findCursor } from '../../src/db/payments.js';
import { DomainError } from '../../src/errors.js';
import { applyUnmatchedPayment } from '../../src/invoicing/apply-payment.js';
import type { Chain } from '../../src/domain/chains.js';
import { dustFloorAtomic, remainingAtomic } from '../../src/domain/payments.js';
import type { ApiFixture } from '../helpers/context.js';
import { SIMULATED_CHAIN, startSimulatedChainFixture } from '../helpers/simulated-chain.js';
import { apiClient } from '../helpers/http.js';
import { seededRandom, type Random } from '../helpers/seeded-random.js';

const { token: TOKEN, feeAddress: FEE, payer: PAYER } = SIMULATED_CHAIN;
const STRANGER = '0x4000000000000000000000000000000000000004';
const ZERO = '0x0000000000000000000000000000000000000000';
const CONFIRMATIONS = 2;

let fx: ApiFixture;
let chain: Chain;
const api = apiClient(() => fx.api.app);

beforeAll(async () => {
  ({ fx, chain } = await startSimulatedChainFixture('detector-property'));
}, 60_000);
afterAll(async () => {
  await fx?.close();
});

interface Inv {
  id: string;
  amount: bigint;
  fee: bigint;
  topic: string;
}
type Step =
  | { kind: 'proxy'; topic: string; to: string; amount: bigint; fee: bigint; feeAddress: string }
  | { kind: 'transfer'; to: string; value: bigint };
interface Tx {
  hash: string;
  steps: Step[];
}
interface Block {
  number: bigint;
  hash: string;
  txs: Tx[];
}

const hex32 = (r: Random) => `0x${Array.from({ length: 64 }, () => '0123456789abcdef'[r.int(0, 15)]).join('')}`;

/** The simulated chain (one for the whole file: the chain's cursor is one), and the watcher's view of it. */
const blocks: Block[] = [{ number: 0n, hash: '0xgenesis', txs: [] }];
/** Hashes of the blocks as the cursor passed them: where a deep reorg forked. */
const passed = new Map<bigint, string>();

function logsOf(from: bigint, to: bigint, watched: Set<string>): { proxy: ProxyLog[]; transfers: TransferLog[] } {
  const proxy: ProxyLog[] = [];
  const transfers: TransferLog[] = [];
  for (const b of blocks.slice(Number(from), Number(to) + 1)) {
    let i = 0;
    for (const tx of b.txs) {
      const at = () => ({ txHash: tx.hash, logIndex: i++, blockNumber: b.number, blockHash: b.hash, blockTimestamp: null });
      const transfer = (toAddr: string, value: bigint) => {
        const log = { ...at(), tokenAddress: TOKEN, from: PAYER, to: toAddr, value };
        if (watched.has(toAddr.toLowerCase())) transfers.push(log);
      };
      for (const s of tx.steps) {
        if (s.kind === 'transfer') {
          transfer(s.to, s.value);
          continue;
        }
        transfer(s.to, s.amount);
        if (s.fee > 0n && s.feeAddress !== ZERO) transfer(s.feeAddress, s.fee);
        proxy.push({ ...at(), tokenAddress: TOKEN, to: s.to, amount: s.amount, referenceTopic: s.topic, feeAmount: s.fee, feeAddress: s.feeAddress });
      }
    }
  }
  return { proxy, transfers };
}

/** One watcher run, as watcher.ts makes it: a reorg under the cursor rewinds to the fork; confirmed up to the safe head; pending above. */
async function scan(merchant: string): Promise<void> {
  const head = BigInt(blocks.length - 1);
  const safe = head - BigInt(CONFIRMATIONS);
  const cursor = await findCursor(fx.api.pool, chain.chainId);
  let cur = cursor ? BigInt(cursor.block_number) : -1n;
  if (cursor?.block_hash && cur >= 0n && blocks[Number(cur)].hash !== cursor.block_hash) {
    let fork = cur - 1n;
    while (fork >= 0n && passed.get(fork) !== blocks[Number(fork)].hash) fork--;
    expect(await rewindCursor(fx.api.pool, chain, cur, { block: fork, hash: fork >= 0n ? blocks[Number(fork)].hash : null, checkpoints: [] })).toBe(true);
    cur = fork;
  }
  const watched = new Set([merchant.toLowerCase(), FEE.toLowerCase()]);
  const read = (from: bigint, to: bigint) => {
    const { proxy, transfers } = logsOf(from, to, watched);
    return observePayments({ proxy: proxy, transfer: transfers }, FEE);
  };
  const times = new Map(blocks.map((b) => [b.number, new Date(1_700_000_000_000 + Number(b.number) * 1000)]));
  if (cur < safe) {
    const done = await recordRange(fx.api.pool, chain, {
      from: cur + 1n,
      to: safe,
      final: true,
      observed: read(cur + 1n, safe),
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
  await recordRange(fx.api.pool, chain, { from: cur + 1n, to: head, final: false, observed: read(cur + 1n, head), blockTimes: new Map(), head, safe, expectedCursor: cur });
}

async function sentInvoices(r: Random, n: number): Promise<Inv[]> {
  const out: Inv[] = [];
  for (let i = 0; i < n; i++) {
    // Some amounts alike: plain transfers of that amount are ambiguous.
    const amount = r.chance(0.3) ? '12.34' : `${r.int(1, 40)}.${String(r.int(0, 99)).padStart(2, '0')}`;
    const created = await api.post('/v1/invoices', fx.merchant.keys.sandbox, { customer_email: `p${i}@example.test`, amount, network: 'local', currency: 'USDC' });
    expect(created.status, created.raw).toBe(200);
    const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, fx.merchant.keys.sandbox);
    expect(sent.status, sent.raw).toBe(200);
    const { rows } = await fx.api.pool.query<{ amount_atomic: string; fee_atomic: string; payment_reference_topic: string }>(
      'select amount_atomic::text, fee_atomic::text, payment_reference_topic from invoices where id = $1',
      [created.body.data.id],
    );
    out.push({ id: created.body.data.id, amount: BigInt(rows[0].amount_atomic), fee: BigInt(rows[0].fee_atomic), topic: rows[0].payment_reference_topic });
  }
  return out;
}

function randomTx(r: Random, invoices: Inv[], merchant: string): Tx {
  const steps: Step[] = [];
  for (let n = r.int(1, 2); n > 0; n--) {
    const inv = r.pick(invoices);
    if (r.chance(0.55)) {
      const part = r.pick([inv.amount, inv.amount / 2n, 1n, BigInt(r.int(1, 50_000_000))]);
      const ruleFee = (part * 50n + 5_000n) / 10_000n;
      const feeAddress = r.pick([FEE, FEE, ZERO, PAYER, merchant]);
      steps.push({
        kind: 'proxy',
        topic: r.chance(0.9) ? inv.topic : keccak256(toHex(r.int(0, 1e9))),
        to: merchant,
        amount: part - ruleFee,
        fee: feeAddress === ZERO && r.chance(0.3) ? 2n ** 256n - 2n : r.pick([ruleFee, ruleFee, 0n, part]),
        feeAddress,
      });
    } else {
      steps.push({ kind: 'transfer', to: merchant, value: r.pick([0n, 0n, 5_000n, inv.amount, inv.amount / 2n, BigInt(r.int(1, 50_000_000))]) });
    }
  }
  return { hash: hex32(r), steps };
}

/**
 * What the canonical chain did to the invoices, by the rule (docs/payments.md "What counts"),
 * in chain order: proxy payments by reference, plain transfers to the one open invoice whose
 * remaining amount is exactly their value.
 */
function expected(invoices: Inv[], txs: Tx[], merchant: string): Map<string, { paid: bigint; status: string; received: bigint }> {
  const state = new Map(invoices.map((i) => [i.id, { paid: 0n, feeCounted: 0n, status: 'open', received: 0n }]));
  const apply = (inv: Inv, received: bigint, feeToPlatform: bigint) => {
    const s = state.get(inv.id)!;
    if (s.status !== 'open') return;
    const room = inv.fee - s.feeCounted;
    const fee = feeToPlatform < room ? feeToPlatform : room;
    s.paid += received + fee;
    s.feeCounted += fee;
    s.received += received;
    if (s.paid >= inv.amount) s.status = 'paid';
  };
  for (const tx of txs) {
    for (const step of tx.steps) {
      // A step that paid someone else (a re-inclusion that changed what the transaction does) pays no invoice of the merchant's.
      if (step.to !== merchant) continue;
      if (step.kind === 'proxy') {
        const inv = invoices.find((i) => i.topic === step.topic);
        if (inv) apply(inv, step.amount, step.feeAddress === FEE ? step.fee : 0n);
      } else if (step.value > 0n) {
        const open = invoices.filter((i) => state.get(i.id)!.status === 'open' && remainingAtomic({ amountAtomic: i.amount, paidAtomic: state.get(i.id)!.paid }) === step.value);
        if (open.length === 1) apply(open[0], step.value, 0n);
      }
    }
  }
  return new Map([...state].map(([id, s]) => [id, { paid: s.paid, status: s.status, received: s.received }]));
}

const stats = { deep: 0, exact: 0, redirected: 0 };

describe('the detector over random sequences with reorgs (seeded)', () => {
  for (const seed of [101, 202, 303, 404, 505, 606, 707, 808, 909, 1010, 1111, 1212, 1313, 1414, 1515, 1616]) {
    it(`seed ${seed}: every invoice holds what reached its merchant for it on the canonical chain, once`, async () => {
      const r = seededRandom(seed);
      // A settlement address of its own per sequence: its plain transfers can only match its invoices.
      const merchant = privateKeyToAccount(generatePrivateKey()).address;
      expect((await api.patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: merchant })).status).toBe(200);
      const invoices = await sentInvoices(r, r.int(3, 6));
      const first = blocks.length;
      let lostForGood = false;
      for (let op = 0; op < 30; op++) {
        const roll = r.next();
        if (roll < 0.5) {
          blocks.push({ number: BigInt(blocks.length), hash: hex32(r), txs: Array.from({ length: r.int(0, 3) }, () => randomTx(r, invoices, merchant)) });
        } else if (roll < 0.8) {
          await scan(merchant);
        } else if (blocks.length - first >= 1) {
          // Replace the last `depth` blocks (never this sequence's predecessors'): some of their
          // transactions come back later in the new blocks, after a filler, in their order; others are gone.
          const depth = r.int(1, Math.min(6, blocks.length - first));
          const old = blocks.splice(blocks.length - depth, depth);
          // Every third sequence also loses transactions for good, and has some come back paying
          // someone else: the same transaction on another chain state (a contract whose target
          // changed), seen again in another block. Either way its merchant never gets the money.
          const back = old.flatMap((b) => b.txs).flatMap((tx) => {
            if (seed % 3 !== 0 || r.chance(0.7)) return [tx];
            lostForGood = true;
            if (r.chance(0.5)) return [];
            stats.redirected++;
            return [{ hash: tx.hash, steps: tx.steps.map((st) => ({ ...st, to: STRANGER })) }];
          });
          if (depth > CONFIRMATIONS) stats.deep++;
          const count = depth + r.int(0, 1);
          for (let n = 0; n < count; n++) blocks.push({ number: BigInt(blocks.length), hash: hex32(r), txs: [] });
          // In their order, a filler before some of them: their log indexes differ from before.
          let at = blocks.length - count;
          for (const tx of back) {
            if (r.chance(0.4)) at = Math.min(blocks.length - 1, at + 1);
            const b = blocks[at];
            if (r.chance(0.5)) b.txs.push({ hash: hex32(r), steps: [{ kind: 'transfer', to: STRANGER, value: 1n }] });
            b.txs.push(tx);
          }
        }
      }
      for (let n = 0; n <= CONFIRMATIONS; n++) blocks.push({ number: BigInt(blocks.length), hash: hex32(r), txs: [] });
      await scan(merchant);
      await scan(merchant);

      const canonical = blocks.slice(first).flatMap((b) => b.txs);
      const onChain = new Set(canonical.map((t) => t.hash));
      const truth = expected(invoices, canonical, merchant);
      const { rows: payments } = await fx.api.pool.query<{
        tx_hash: string;
        invoice_id: string | null;
        status: string;
        outcome: string | null;
        counted_atomic: string | null;
        received_atomic: string;
        fee_received_atomic: string;
        kind: string;
      }>(
        `select tx_hash, invoice_id, status, outcome, counted_atomic::text, received_atomic::text, fee_received_atomic::text, kind
         from payments where lower(to_address) = lower($1)`,
        [merchant],
      );
      const paysMerchant = new Set(canonical.filter((t) => t.steps.some((st) => st.to === merchant)).map((t) => t.hash));
      for (const p of payments) {
        // Nothing confirmed from a transaction the chain no longer holds, nor from one that now pays
        // someone else; nothing pending once all is final.
        if (p.status === 'confirmed') expect(onChain.has(p.tx_hash), `confirmed payment of ${p.tx_hash} is on the chain`).toBe(true);
        if (p.status === 'confirmed') expect(paysMerchant.has(p.tx_hash), `confirmed payment of ${p.tx_hash} still pays the merchant: ${JSON.stringify(p)} ${JSON.stringify(canonical.find((t) => t.hash === p.tx_hash), (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`).toBe(true);
        expect(p.status).not.toBe('pending');
        expect(p.kind === 'transfer' && p.received_atomic === '0').toBe(false);
        // Dust no invoice claims is no row.
        if (p.outcome === 'unmatched') expect(BigInt(p.received_atomic) + BigInt(p.fee_received_atomic)).toBeGreaterThanOrEqual(dustFloorAtomic(6));
      }
      for (const inv of invoices) {
        const { rows } = await fx.api.pool.query<{ status: string; amount_paid_atomic: string; fee_counted_atomic: string }>(
          'select status, amount_paid_atomic::text, fee_counted_atomic::text from invoices where id = $1',
          [inv.id],
        );
        const mine = payments.filter((p) => p.invoice_id === inv.id && p.status === 'confirmed' && p.outcome === 'applied');
        const counted = mine.reduce((a, p) => a + BigInt(p.counted_atomic!), 0n);
        const received = mine.reduce((a, p) => a + BigInt(p.received_atomic), 0n);
        // The books add up, from payments on the chain only; the fee counted too (the instructions' room).
        expect(BigInt(rows[0].amount_paid_atomic), `invoice ${inv.id} (seed ${seed})`).toBe(counted);
        const fee = mine.reduce((a, p) => a + BigInt(p.counted_atomic!) - (BigInt(p.received_atomic) < BigInt(p.counted_atomic!) ? BigInt(p.received_atomic) : BigInt(p.counted_atomic!)), 0n);
        expect(BigInt(rows[0].fee_counted_atomic), `invoice ${inv.id}'s fee counted (seed ${seed})`).toBe(fee);
        if (!lostForGood) {
          stats.exact++;
          // What its merchant received for it on the canonical chain, plus the fees that reached the fee address, capped.
          expect({ paid: BigInt(rows[0].amount_paid_atomic), status: rows[0].status }, `invoice ${inv.id} (seed ${seed})`).toEqual({ paid: truth.get(inv.id)!.paid, status: truth.get(inv.id)!.status });
        }
        // Never paid for less than the merchant's part (a paid invoice whose payment left the chain for good is reported, and stays paid).
        if (rows[0].status === 'paid' && !lostForGood) expect(received).toBeGreaterThanOrEqual(inv.amount - inv.fee);
      }
      // The merchant applies what stayed unmatched (or hit a paid or void invoice) to invoices of its
      // choosing, through the rule the detector applies with: the books still add up.
      const scope = { accountId: fx.merchant.accountId, environment: 'sandbox' as const };
      const { rows: leftOver } = await fx.api.pool.query<{ id: string }>(
        `select id from payments where lower(to_address) = lower($1) and status = 'confirmed' and outcome <> 'applied' order by id`,
        [merchant],
      );
      for (const p of leftOver) {
        try {
          await applyUnmatchedPayment(fx.api.pool, [chain], scope, p.id, r.pick(invoices).id);
        } catch (err) {
          // A paid or void invoice takes none: refused, nothing written.
          if (!(err instanceof DomainError) || err.code !== 'payment_invoice_mismatch') throw err;
        }
      }
      for (const inv of invoices) {
        const { rows } = await fx.api.pool.query<{ paid: string; counted: string }>(
          `select i.amount_paid_atomic::text as paid,
             (select coalesce(sum(p.counted_atomic), 0)::text from payments p where p.invoice_id = i.id and p.status = 'confirmed' and p.outcome = 'applied') as counted
           from invoices i where i.id = $1`,
          [inv.id],
        );
        expect(rows[0].paid, `invoice ${inv.id} after the merchant's applications (seed ${seed})`).toBe(rows[0].counted);
      }
    }, 120_000);
  }

  it('the sequences did what they are for: deep reorgs, payments reorged out and back, every kind of attack, exact checks', async () => {
    const count = async (sql: string) => (await fx.api.pool.query<{ n: number }>(sql)).rows[0].n;
    expect(stats.deep).toBeGreaterThan(3);
    expect(stats.exact).toBeGreaterThan(30);
    expect(stats.redirected).toBeGreaterThan(3);
    expect(await count(`select count(*)::int as n from events where type = 'payment.reorged_out'`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from payments where status = 'confirmed' and reorged_out_at is null and exists (select 1 from events e where e.object_id = payments.id and e.type = 'payment.reorged_out')`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from payments where kind = 'proxy' and fee_address = '${ZERO}' and outcome = 'applied'`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from payments where kind = 'proxy' and fee_address = '${PAYER}' and outcome = 'applied'`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from payments where kind = 'transfer' and outcome = 'applied'`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from payments where outcome = 'unmatched'`)).toBeGreaterThan(0);
    expect(await count(`select count(*)::int as n from invoices where status = 'paid'`)).toBeGreaterThan(5);
  });
});
