// Property tests of what a payment counts (issue 24), pure and seeded (the seed of a failing run is
// in the test's name): random transactions of proxy calls (random amounts and fees, fee addresses
// zero, the payer, the merchant, another merchant, the platform's; several calls in one
// transaction) and plain transfers (zero, dust, any value), read back as logs the way the watcher
// reads them. What observePayments and countedAtomic make of them must be what the chain moved.
import { describe, expect, it } from 'vitest';
import { InconsistentLogsError, observePayments, type ObservedPayment } from '../../src/chain/observe.js';
import type { TransferLog } from '../../src/chain/kinds/kind.js';
import type { ProxyLog } from '../../src/chain/kinds/proxy.js';
import { MAX_COUNTABLE_ATOMIC, applyPaymentTo, countedAtomic, feeRoomAtomic, paymentInstructions, splitFee } from '../../src/domain/payments.js';
import { seededRandom, type Random } from '../helpers/seeded-random.js';

const TOKEN = '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512';
const PAYER = '0x1000000000000000000000000000000000000001';
const MERCHANT = '0x2000000000000000000000000000000000000002';
const OTHER_MERCHANT = '0x3000000000000000000000000000000000000003';
const FEE = '0xa0ee7a142d267c1f36714e4a8f75612f20a79720';
const ZERO = '0x0000000000000000000000000000000000000000';
const STRANGER = '0x4000000000000000000000000000000000000004';
/** The addresses the watcher asks Transfer logs for: settlement addresses and the chain's fee address. */
const WATCHED = new Set([MERCHANT, OTHER_MERCHANT, FEE]);

interface Call {
  to: string;
  amount: bigint;
  fee: bigint;
  feeAddress: string;
}
type Step = { kind: 'proxy'; call: Call } | { kind: 'transfer'; to: string; value: bigint };

function randomAmount(r: Random): bigint {
  return r.pick([0n, 1n, 9_999n, 10_000n, BigInt(r.int(1, 100_000_000)), BigInt(r.int(1, 1_000)) * 1_000_000n]);
}

function randomStep(r: Random): Step {
  if (r.chance(0.6)) {
    const feeAddress = r.pick([ZERO, PAYER, MERCHANT, OTHER_MERCHANT, FEE, STRANGER]);
    // A fee of 2^256 - 2 can only be claimed when nothing moves it (fee address zero).
    const fee = feeAddress === ZERO && r.chance(0.2) ? 2n ** 256n - 2n : randomAmount(r);
    return { kind: 'proxy', call: { to: r.pick([MERCHANT, OTHER_MERCHANT]), amount: randomAmount(r), fee, feeAddress } };
  }
  return { kind: 'transfer', to: r.pick([MERCHANT, OTHER_MERCHANT, STRANGER, FEE]), value: r.pick([0n, 0n, 1n, randomAmount(r)]) };
}

/** The logs of one transaction as ERC20FeeProxy and the token emit them, from `first` on within its block. */
function logsOf(txHash: string, steps: Step[], block: bigint, first: number): { proxy: ProxyLog[]; transfers: TransferLog[] } {
  const at = (logIndex: number) => ({ txHash, logIndex, blockNumber: block, blockHash: `0xb${block}`, blockTimestamp: null });
  const proxy: ProxyLog[] = [];
  const transfers: TransferLog[] = [];
  let i = first;
  for (const s of steps) {
    if (s.kind === 'transfer') {
      transfers.push({ ...at(i++), tokenAddress: TOKEN, from: PAYER, to: s.to, value: s.value });
      continue;
    }
    const c = s.call;
    transfers.push({ ...at(i++), tokenAddress: TOKEN, from: PAYER, to: c.to, value: c.amount });
    if (c.fee > 0n && c.feeAddress !== ZERO) transfers.push({ ...at(i++), tokenAddress: TOKEN, from: PAYER, to: c.feeAddress, value: c.fee });
    proxy.push({ ...at(i++), tokenAddress: TOKEN, to: c.to, amount: c.amount, referenceTopic: '0xref', feeAmount: c.fee, feeAddress: c.feeAddress });
  }
  return { proxy, transfers: transfers.filter((t) => WATCHED.has(t.to)) };
}

const identity = (o: ObservedPayment) => `${o.txHash}|${o.txPosition}`;

describe('observing payments (seeded random transactions)', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`seed ${seed}: a proxy call counts what its legs moved, its legs are never plain transfers, and identities survive a re-inclusion`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 200; round++) {
        const txs = Array.from({ length: r.int(1, 4) }, (_, n) => ({ hash: `0x${seed}${round}${n}`, steps: Array.from({ length: r.int(1, 4) }, () => randomStep(r)) }));
        const read = (block: bigint, shift: number) => {
          let next = shift;
          const proxy: ProxyLog[] = [];
          const transfers: TransferLog[] = [];
          for (const tx of txs) {
            const logs = logsOf(tx.hash, tx.steps, block, next);
            next += tx.steps.reduce((a, s) => a + (s.kind === 'transfer' ? 1 : s.call.fee > 0n && s.call.feeAddress !== ZERO ? 3 : 2), 0);
            proxy.push(...logs.proxy);
            transfers.push(...logs.transfers);
          }
          return observePayments({ proxy: proxy, transfer: transfers }, FEE);
        };
        const seen = read(10n, 0);

        const calls = txs.flatMap((tx) => tx.steps.flatMap((s) => (s.kind === 'proxy' ? [s.call] : [])));
        const proxies = seen.filter((o) => o.kind === 'proxy');
        expect(proxies).toHaveLength(calls.length);
        proxies.forEach((o, n) => {
          const c = calls[n];
          expect(o.receivedAtomic).toBe(c.amount);
          expect(o.feeReceivedAtomic).toBe(c.feeAddress === FEE && c.fee > 0n ? c.fee : 0n);
        });
        // Plain transfers: exactly those sent by themselves to a settlement address; none to the fee address.
        const plain = txs.flatMap((tx) => tx.steps.flatMap((s) => (s.kind === 'transfer' && (s.to === MERCHANT || s.to === OTHER_MERCHANT) ? [s.value] : [])));
        expect(seen.filter((o) => o.kind === 'transfer').map((o) => o.amountAtomic)).toEqual(plain);
        expect(new Set(seen.map(identity)).size).toBe(seen.length);

        // The same transactions again in another block, their logs further down it: the same payments.
        const again = read(12n, r.int(1, 50));
        expect(again.map(identity)).toEqual(seen.map(identity));
        expect(again.map((o) => [o.receivedAtomic, o.feeReceivedAtomic])).toEqual(seen.map((o) => [o.receivedAtomic, o.feeReceivedAtomic]));
      }
    });
  }
});

describe('counting payments toward an invoice (seeded random sequences)', () => {
  for (const seed of [11, 12, 13, 14, 15, 16, 17, 18]) {
    it(`seed ${seed}: fees count up to the invoice's own fee, so it is paid only once its merchant received its part`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 500; round++) {
        const amount = BigInt(r.int(1, 10_000)) * 10_000n;
        const invoiceFee = (amount * BigInt(r.int(0, 300)) + 5_000n) / 10_000n;
        let paid = 0n;
        let feeCounted = 0n;
        let received = 0n;
        for (let n = r.int(1, 6); n > 0 && paid < amount; n--) {
          const receipt = {
            receivedAtomic: r.pick([0n, 1n, BigInt(r.int(0, Number(amount))), 2n ** 256n - 1n]),
            feeReceivedAtomic: r.pick([0n, BigInt(r.int(0, Number(invoiceFee) + 10)), invoiceFee, 2n ** 256n - 2n]),
          };
          const c = countedAtomic(receipt, feeRoomAtomic(invoiceFee, feeCounted));
          expect(c.feeCountedAtomic).toBeLessThanOrEqual(receipt.feeReceivedAtomic);
          expect(c.countedAtomic).toBeLessThanOrEqual(2n * MAX_COUNTABLE_ATOMIC);
          paid += c.countedAtomic;
          feeCounted += c.feeCountedAtomic;
          received += receipt.receivedAtomic;
        }
        expect(feeCounted).toBeLessThanOrEqual(invoiceFee);
        if (paid >= amount) expect(received).toBeGreaterThanOrEqual(amount - invoiceFee);
      }
    });
  }
});

describe('paying exactly what the instructions say (seeded random sequences)', () => {
  const chain = { feeProxy: '0x5fbdb2315678afecb367f032d93f642f64180aa3', feeAddress: FEE };
  for (const seed of [31, 32, 33, 34, 35, 36]) {
    it(`seed ${seed}: after any partial payments, the instructions' amount and fee pay what remains exactly, never more of the fee than is left`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 500; round++) {
        const feeBps = r.pick([0, 1, 50, 99, 250, 300]);
        const amount = BigInt(r.int(1, 100_000_000));
        const invoiceFee = splitFee(amount, feeBps).feeAtomic;
        let paid = 0n;
        let feeCounted = 0n;
        // Partial payments through the proxy: of any size below what remains, their fee by the rule,
        // or any fee (the payer chooses what it sends).
        for (let n = r.int(0, 4); n > 0 && amount - paid > 1n; n--) {
          const total = BigInt(r.int(1, Number(amount - paid) - 1));
          const fee = r.chance(0.7) ? splitFee(total, feeBps).feeAtomic : BigInt(r.int(0, Number(total)));
          const c = countedAtomic({ receivedAtomic: total - fee, feeReceivedAtomic: fee }, feeRoomAtomic(invoiceFee, feeCounted));
          paid += c.countedAtomic;
          feeCounted += c.feeCountedAtomic;
        }
        if (paid >= amount) continue;
        const inv = { status: 'open' as const, chainId: 1, network: 'x', tokenAddress: TOKEN, tokenDecimals: 6, settlementAddress: MERCHANT, paymentReference: '0x01', amountAtomic: amount, paidAtomic: paid, feeAtomic: invoiceFee, feeCountedAtomic: feeCounted, feeBps };
        const pi = paymentInstructions(inv, chain)!;
        expect(BigInt(pi.amount_atomic) + BigInt(pi.fee_atomic)).toBe(amount - paid);
        expect(BigInt(pi.fee_atomic)).toBeLessThanOrEqual(feeRoomAtomic(invoiceFee, feeCounted));
        const c = countedAtomic({ receivedAtomic: BigInt(pi.amount_atomic), feeReceivedAtomic: BigInt(pi.fee_atomic) }, feeRoomAtomic(invoiceFee, feeCounted));
        expect(paid + c.countedAtomic).toBe(amount);
      }
    });
  }
});

const feeChain = { feeProxy: '0x5fbdb2315678afecb367f032d93f642f64180aa3', feeAddress: '0x00000000000000000000000000000000000000fe' };

// An attacker mixing the instructions with any split of its own (a partial with a huge fee to the
// fee address, so the rest is asked with a fee of 0): the invoice still turns paid only once its
// merchant has received its part (from an adversarial review of the instructions' fee cap).
describe('the instructions beside any payer split (seeded random sequences)', () => {
  for (const seed of [71, 72, 73]) {
    it(`seed ${seed}: the merchant has received at least amount - fee whenever the invoice turns paid`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 2000; round++) {
        const feeBps = r.pick([0, 1, 50, 250, 300]);
        const amount = BigInt(r.int(1, 50_000_000));
        const fee = splitFee(amount, feeBps).feeAtomic;
        let ledger = { status: 'open' as const as 'open' | 'paid', amountAtomic: amount, paidAtomic: 0n, feeAtomic: fee, feeCountedAtomic: 0n };
        let merchant = 0n;
        for (let step = 0; step < 6 && ledger.status !== 'paid'; step++) {
          let received: bigint;
          let feeSent: bigint;
          const pi = paymentInstructions({ status: ledger.status, chainId: 1, network: 'x', tokenAddress: TOKEN, tokenDecimals: 6, settlementAddress: '0x01', paymentReference: '0x01', amountAtomic: amount, paidAtomic: ledger.paidAtomic, feeAtomic: fee, feeCountedAtomic: ledger.feeCountedAtomic, feeBps }, feeChain);
          if (pi && r.chance(0.4)) {
            received = BigInt(pi.amount_atomic);
            feeSent = BigInt(pi.fee_atomic);
          } else {
            // The attacker: any split, a huge fee to the fee address included.
            received = BigInt(r.int(0, Number(amount)));
            feeSent = r.chance(0.5) ? BigInt(r.int(0, Number(amount) * 2)) : 0n;
          }
          const a = applyPaymentTo(ledger, { receivedAtomic: received, feeReceivedAtomic: feeSent }, { blockTime: new Date(), dustFloorAtomic: 1n });
          if (a.outcome !== 'applied') break;
          merchant += received;
          ledger = a.ledger as typeof ledger;
          expect(ledger.feeCountedAtomic).toBeLessThanOrEqual(fee);
        }
        if (ledger.status === 'paid') expect(merchant).toBeGreaterThanOrEqual(amount - fee);
      }
    });
  }
});

describe('a node answering a log twice, or one transaction in two blocks', () => {
  const at = (txHash: string, logIndex: number, blockHash: string) => ({ txHash, logIndex, blockNumber: 7n, blockHash, blockTimestamp: null });
  const transfer = (txHash: string, logIndex: number, blockHash = '0xb7'): TransferLog => ({ ...at(txHash, logIndex, blockHash), tokenAddress: TOKEN, from: PAYER, to: MERCHANT, value: 5_000_000n });

  it('the same log twice is one payment, not two', () => {
    const t = transfer('0x01', 3);
    expect(observePayments({ proxy: [], transfer: [t, { ...t }] }, FEE)).toHaveLength(1);
  });

  it('a proxy payment and its leg repeated: one proxy payment, no plain transfer beside it', () => {
    const leg = transfer('0x02', 0);
    const proxy: ProxyLog = { ...at('0x02', 1, '0xb7'), tokenAddress: TOKEN, to: MERCHANT, amount: 5_000_000n, referenceTopic: '0xref', feeAmount: 0n, feeAddress: ZERO };
    const seen = observePayments({ proxy: [proxy, { ...proxy }], transfer: [leg, { ...leg }] }, FEE);
    expect(seen.map((o) => o.kind)).toEqual(['proxy']);
  });

  it('one transaction in two blocks of one answer is refused (the run fails, nothing is recorded)', () => {
    expect(() => observePayments({ proxy: [], transfer: [transfer('0x03', 0, '0xb7'), transfer('0x03', 0, '0xc7')] }, FEE)).toThrow(InconsistentLogsError);
  });
});
