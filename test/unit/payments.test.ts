// The on-chain payment rules, pure: Request's payment reference, addresses, what an invoice asks
// for and what a payment does to it, which invoice a plain transfer pays, and the merge of a
// proxy payment with its own Transfer log.
import { keccak_256 } from '@noble/hashes/sha3.js';
import { describe, expect, it } from 'vitest';
import { observePayments } from '../../src/chain/observe.js';
import type { TransferLog } from '../../src/chain/kinds/kind.js';
import { proxyKind, type ProxyLog } from '../../src/chain/kinds/proxy.js';
import { transferKind } from '../../src/chain/kinds/transfer.js';
import {
  MAX_COUNTABLE_ATOMIC,
  applyPayment,
  confirmationsAt,
  countedAtomic,
  dustFloorAtomic,
  feeRoomAtomic,
  derivePaymentReference,
  matchTransfer,
  parseAddress,
  paymentInstructions,
  referenceTopic,
  remainingAtomic,
  safeHead,
  splitFee,
  type PayableInvoice,
} from '../../src/domain/payments.js';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

describe('payment reference', () => {
  it("is Request's last8Bytes(keccak256(lowercase(id + salt + address))): checked with another keccak implementation", () => {
    const id = 'inv_AbC123';
    const salt = '0123456789abcdef';
    const address = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
    const expected = `0x${hex(keccak_256(new TextEncoder().encode(`${id}${salt}${address}`.toLowerCase()))).slice(-16)}`;
    expect(derivePaymentReference(id, salt, address)).toBe(expected);
    expect(derivePaymentReference(id, salt, address)).toMatch(/^0x[0-9a-f]{16}$/);
    // The address's case does not matter; the salt and the id do.
    expect(derivePaymentReference(id, salt, address.toLowerCase())).toBe(expected);
    expect(derivePaymentReference(id, 'fedcba9876543210', address)).not.toBe(expected);
    expect(derivePaymentReference('inv_AbC124', salt, address)).not.toBe(expected);
  });

  it("the proxy event's indexed topic is keccak256 of the reference's 8 bytes", () => {
    const ref = '0x1122334455667788';
    expect(referenceTopic(ref)).toBe(`0x${hex(keccak_256(Buffer.from('1122334455667788', 'hex')))}`);
  });
});

describe('addresses', () => {
  it('accepts EIP-55 or lower case and returns it checksummed; refuses a bad checksum or shape, naming the field', () => {
    expect(parseAddress('0x70997970c51812dc3a010c7d01b50e0d17dc79c8', 'to')).toEqual({ ok: true, address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' });
    expect(parseAddress('0x70997970C51812dc3A010C7d01b50e0d17dc79C8', 'to').ok).toBe(true);
    const bad = parseAddress('0x70997970C51812DC3A010C7d01b50e0d17dc79C8', 'settlement_address');
    expect(bad).toMatchObject({ ok: false, message: expect.stringContaining('settlement_address') });
    expect(parseAddress('0x1234', 'to').ok).toBe(false);
  });
});

const invoice = (over: Partial<PayableInvoice> = {}): PayableInvoice => ({
  status: 'open',
  chainId: 31337,
  network: 'local',
  tokenAddress: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
  tokenDecimals: 6,
  settlementAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  paymentReference: '0x1122334455667788',
  amountAtomic: 25_000_000n,
  paidAtomic: 0n,
  feeAtomic: 125_000n,
  feeCountedAtomic: 0n,
  feeBps: 50,
  ...over,
});
const CHAIN = { feeProxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3', feeAddress: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720' };

describe('payment instructions', () => {
  it('ask for what remains, split into the fee (half up) and the merchant share', () => {
    expect(paymentInstructions(invoice(), CHAIN)).toMatchObject({ total_atomic: '25000000', fee_atomic: '125000', amount_atomic: '24875000', to: invoice().settlementAddress });
    // After 10 paid: 15 remain, fee 0.5% of 15 = 0.075.
    expect(paymentInstructions(invoice({ paidAtomic: 10_000_000n, feeCountedAtomic: 50_000n }), CHAIN)).toMatchObject({ total_atomic: '15000000', fee_atomic: '75000', amount_atomic: '14925000' });
    // Half up: 0.5% of 101 = 0.505 -> 1.
    expect(splitFee(101n, 50)).toEqual({ amountAtomic: 100n, feeAtomic: 1n });
    expect(splitFee(99n, 50)).toEqual({ amountAtomic: 99n, feeAtomic: 0n });
  });

  it("after a partial payment, ask for no more of the invoice's fee than is left to count: paying them exactly pays the invoice", () => {
    // 30 USDC, fee 150,000. A partial of 10.0001 whose fee by the rule (50,000.5) was rounded up to
    // 50,001 leaves 99,999 of the fee; the rule's fee of the 19,999,900 left is 99,999.5 -> 100,000.
    const inv = invoice({ amountAtomic: 30_000_000n, feeAtomic: 150_000n, paidAtomic: 10_000_100n, feeCountedAtomic: 50_001n });
    const pi = paymentInstructions(inv, CHAIN)!;
    expect(pi).toMatchObject({ total_atomic: '19999900', fee_atomic: '99999', amount_atomic: '19899901' });
    // Counted as the detector counts it: the merchant's share plus the fee up to the room.
    const counted = countedAtomic({ receivedAtomic: BigInt(pi.amount_atomic), feeReceivedAtomic: BigInt(pi.fee_atomic) }, feeRoomAtomic(150_000n, 50_001n));
    expect(inv.paidAtomic + counted.countedAtomic).toBe(30_000_000n);
    // The whole fee counted already (a partial that paid it all): the rest goes to the merchant.
    expect(paymentInstructions(invoice({ paidAtomic: 10_000_000n, feeCountedAtomic: 125_000n }), CHAIN)).toMatchObject({ fee_atomic: '0', amount_atomic: '15000000' });
    // Not known (an event's snapshot from before it was stored): the rule's fee, as before.
    expect(paymentInstructions(invoice({ paidAtomic: 10_000_000n, feeCountedAtomic: null }), CHAIN)).toMatchObject({ fee_atomic: '75000' });
  });

  it('are null for drafts, paid and void invoices, without address or reference, without proxy or fee address, or when nothing remains', () => {
    for (const status of ['draft', 'paid', 'void'] as const) expect(paymentInstructions(invoice({ status }), CHAIN)).toBeNull();
    expect(paymentInstructions(invoice({ settlementAddress: null }), CHAIN)).toBeNull();
    expect(paymentInstructions(invoice({ paymentReference: null }), CHAIN)).toBeNull();
    expect(paymentInstructions(invoice(), { ...CHAIN, feeProxy: null })).toBeNull();
    expect(paymentInstructions(invoice(), { ...CHAIN, feeAddress: null })).toBeNull();
    expect(paymentInstructions(invoice(), undefined)).toBeNull();
    expect(paymentInstructions(invoice({ paidAtomic: 25_000_000n }), CHAIN)).toBeNull();
    expect(paymentInstructions(invoice({ status: 'overdue' }), CHAIN)).not.toBeNull();
  });
});

describe('applying a confirmed payment', () => {
  it('adds up: less stays open, exactly or more turns paid (the excess visible)', () => {
    expect(applyPayment({ status: 'open', amountAtomic: 100n, paidAtomic: 0n }, 40n)).toEqual({ outcome: 'applied', paidAtomic: 40n, status: 'open', fullyPaid: false });
    expect(applyPayment({ status: 'overdue', amountAtomic: 100n, paidAtomic: 40n }, 40n)).toEqual({ outcome: 'applied', paidAtomic: 80n, status: 'overdue', fullyPaid: false });
    expect(applyPayment({ status: 'open', amountAtomic: 100n, paidAtomic: 80n }, 20n)).toEqual({ outcome: 'applied', paidAtomic: 100n, status: 'paid', fullyPaid: true });
    expect(applyPayment({ status: 'open', amountAtomic: 100n, paidAtomic: 0n }, 130n)).toEqual({ outcome: 'applied', paidAtomic: 130n, status: 'paid', fullyPaid: true });
    expect(remainingAtomic({ amountAtomic: 100n, paidAtomic: 130n })).toBe(0n);
  });

  it('changes nothing on a void or already paid invoice, and says so', () => {
    expect(applyPayment({ status: 'void', amountAtomic: 100n, paidAtomic: 0n }, 100n)).toEqual({ outcome: 'invoice_void' });
    expect(applyPayment({ status: 'paid', amountAtomic: 100n, paidAtomic: 100n }, 100n)).toEqual({ outcome: 'invoice_already_paid' });
  });

  it('expects the rule fee of a proxy payment, none of a transfer', () => {
    expect(proxyKind.expectedFeeAtomic(25_000_000n, 50)).toBe(125_000n);
    expect(transferKind.expectedFeeAtomic(25_000_000n, 50)).toBeNull();
  });
});

describe('matching a plain transfer', () => {
  it('pays the one open or overdue candidate whose remaining amount is exactly the value; none or several: unmatched', () => {
    const owing = (id: string, status: 'open' | 'overdue' | 'paid' | 'void', amountAtomic: bigint, paidAtomic: bigint) => ({ id, balance: { status, amountAtomic, paidAtomic } });
    const a = owing('a', 'open', 10n, 5n);
    const b = owing('b', 'overdue', 7n, 0n);
    const c = owing('c', 'open', 9n, 2n);
    expect(matchTransfer([a, b], 5n)).toBe(a);
    expect(matchTransfer([a, b], 7n)).toBe(b);
    expect(matchTransfer([a, b], 6n)).toBeNull();
    expect(matchTransfer([a, b, c], 7n)).toBeNull();
    expect(matchTransfer([], 7n)).toBeNull();
    // The rule, not the caller, decides: a paid or void invoice takes no transfer, whatever it has left.
    expect(matchTransfer([owing('p', 'paid', 10n, 5n), owing('v', 'void', 5n, 0n)], 5n)).toBeNull();
  });
});

describe('confirmations', () => {
  it('count the blocks built on top of the payment block, as a chain\'s confirmations do; the safe head is head - confirmations', () => {
    expect(confirmationsAt(100n, 100n)).toBe(0);
    expect(confirmationsAt(102n, 100n)).toBe(2);
    expect(confirmationsAt(99n, 100n)).toBe(0);
    // One meaning: a payment's confirmations reach its chain's exactly when its block is at or below the safe head.
    for (const required of [0, 1, 2, 12]) {
      for (let block = 90n; block <= 100n; block++) {
        expect(confirmationsAt(100n, block) >= required).toBe(block <= safeHead(100n, required));
      }
    }
    expect(safeHead(102n, 2)).toBe(100n);
  });
});

describe('observed payments', () => {
  const at = { blockNumber: 10n, blockHash: '0xb', blockTimestamp: null };
  const token = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';
  const to = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
  const proxyLog: ProxyLog = { ...at, txHash: '0x1', logIndex: 2, tokenAddress: token, to, amount: 995n, referenceTopic: '0xt', feeAmount: 5n, feeAddress: CHAIN.feeAddress };
  const own: TransferLog = { ...at, txHash: '0x1', logIndex: 0, tokenAddress: token.toLowerCase(), from: '0xpayer', to: to.toLowerCase(), value: 995n };
  const other: TransferLog = { ...at, txHash: '0x2', logIndex: 3, tokenAddress: token, from: '0xother', to, value: 995n };

  it("merges a proxy payment with its own Transfer log (one payment, the Transfer's sender as payer) and keeps other transfers", () => {
    const seen = observePayments({ proxy: [proxyLog], transfer: [own, other] });
    expect(seen.map((p) => [p.kind, p.txHash, p.amountAtomic, p.feeAtomic, p.from])).toEqual([
      ['proxy', '0x1', 995n, 5n, '0xpayer'],
      ['transfer', '0x2', 995n, 0n, '0xother'],
    ]);
  });

  it('keeps a transfer of another amount in the same transaction as a payment of its own', () => {
    const seen = observePayments({ proxy: [proxyLog], transfer: [{ ...own, value: 1n }] });
    expect(seen.map((p) => p.kind)).toEqual(['transfer', 'proxy']);
  });

  it("reads what moved from the Transfer logs: the fee counts as received only when its Transfer reached the chain's fee address", () => {
    const feeLeg: TransferLog = { ...at, txHash: '0x1', logIndex: 1, tokenAddress: token, from: '0xpayer', to: CHAIN.feeAddress.toLowerCase(), value: 5n };
    expect(observePayments({ proxy: [proxyLog], transfer: [own, feeLeg] }, CHAIN.feeAddress)).toEqual([
      expect.objectContaining({ kind: 'proxy', receivedAtomic: 995n, feeReceivedAtomic: 5n, txPosition: 'proxy:0' }),
    ]);
    // Fee address zero: the proxy moved no fee, whatever feeAmount says.
    const zero = { ...proxyLog, feeAddress: '0x0000000000000000000000000000000000000000', feeAmount: 2n ** 256n - 2n };
    expect(observePayments({ proxy: [zero], transfer: [own] }, CHAIN.feeAddress)).toEqual([expect.objectContaining({ receivedAtomic: 995n, feeReceivedAtomic: 0n })]);
    // No Transfer of the amount to the merchant: nothing received.
    expect(observePayments({ proxy: [proxyLog], transfer: [] }, CHAIN.feeAddress)).toEqual([expect.objectContaining({ receivedAtomic: 0n, feeReceivedAtomic: 0n })]);
  });

  it("a fee leg to the merchant's own address is part of the proxy payment, never a plain transfer; a Transfer to the fee address alone is nobody's", () => {
    const toMerchant = { ...proxyLog, amount: 5n, feeAmount: 5n, feeAddress: to };
    const legs: TransferLog[] = [
      { ...own, logIndex: 0, value: 5n },
      { ...own, logIndex: 1, value: 5n },
    ];
    const seen = observePayments({ proxy: [toMerchant], transfer: legs }, CHAIN.feeAddress);
    expect(seen.map((p) => [p.kind, p.receivedAtomic, p.feeReceivedAtomic])).toEqual([['proxy', 5n, 0n]]);
    const stray: TransferLog = { ...other, to: CHAIN.feeAddress };
    expect(observePayments({ proxy: [], transfer: [stray] }, CHAIN.feeAddress)).toEqual([]);
  });
});

describe('what a payment counts', () => {
  it('what reached the merchant, plus the fee that reached the fee address up to what of the invoice fee is left; bounded', () => {
    expect(countedAtomic({ receivedAtomic: 995n, feeReceivedAtomic: 5n }, feeRoomAtomic(5n, 0n))).toEqual({ countedAtomic: 1000n, feeCountedAtomic: 5n });
    expect(countedAtomic({ receivedAtomic: 1n, feeReceivedAtomic: 99_999_999n }, feeRoomAtomic(500_000n, 0n))).toEqual({ countedAtomic: 500_001n, feeCountedAtomic: 500_000n });
    expect(countedAtomic({ receivedAtomic: 10n, feeReceivedAtomic: 5n }, feeRoomAtomic(5n, 5n))).toEqual({ countedAtomic: 10n, feeCountedAtomic: 0n });
    expect(countedAtomic({ receivedAtomic: 2n ** 256n - 1n, feeReceivedAtomic: 2n ** 256n - 2n }, 2n ** 256n).countedAtomic).toBe(2n * MAX_COUNTABLE_ATOMIC);
    expect(dustFloorAtomic(6)).toBe(10_000n);
    expect(dustFloorAtomic(18)).toBe(10n ** 16n);
  });
});
