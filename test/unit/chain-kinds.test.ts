// The kinds of chain log (src/chain/kinds/): one list, and the subscription contract's charge
// observed and matched by its own module, its legs never plain transfers too.
import { keccak256 } from 'viem';
import { describe, expect, it } from 'vitest';
import { chargeKind, type ChargeLog } from '../../src/chain/kinds/charge.js';
import { PAYMENT_KINDS, kindNamed } from '../../src/chain/kinds/index.js';
import type { CandidateInvoice, CheckoutTerms, InvoiceBook, SubscribedTerms, TransferLog } from '../../src/chain/kinds/kind.js';
import { sameTerms, subscribeKind, type SubscribeLog } from '../../src/chain/kinds/subscribe.js';
import { observePayments } from '../../src/chain/observe.js';

const MANAGER = '0x5555555555555555555555555555555555555555';
const TOKEN = '0x1111111111111111111111111111111111111111';
const PAYEE = '0x2222222222222222222222222222222222222222';
const FEE = '0x3333333333333333333333333333333333333333';
const SUBSCRIBER = '0x4444444444444444444444444444444444444444';
const REF = '0x0123456789abcdef';
const at = { txHash: '0xaa', blockNumber: 7n, blockHash: '0xb7', blockTimestamp: null };

const charge = (logIndex: number, periodIndex = 2): ChargeLog => ({ ...at, logIndex, contractAddress: MANAGER, onchainId: 9n, periodIndex, paymentReference: REF });
const transfer = (logIndex: number, to: string, value: bigint): TransferLog => ({ ...at, logIndex, tokenAddress: TOKEN, from: SUBSCRIBER, to, value });

describe('the list of kinds', () => {
  it('names every kind once, and finds each by its name', () => {
    expect(new Set(PAYMENT_KINDS).size).toBe(PAYMENT_KINDS.length);
    for (const name of PAYMENT_KINDS) expect(kindNamed(name).name).toBe(name);
    expect(() => kindNamed('nothing')).toThrow();
  });
});

describe('a subscription charge', () => {
  it('counts the Transfer legs after its event (the payee share, the fee that reached the fee address); a transfer before it stays a plain one', () => {
    const seen = observePayments({ charge: [charge(5)], transfer: [transfer(2, PAYEE, 1n), transfer(6, PAYEE, 9_950_000n), transfer(7, FEE, 50_000n)] }, FEE);
    expect(seen.map((p) => p.kind)).toEqual(['transfer', 'charge']);
    expect(seen[1]).toMatchObject({
      txPosition: 'charge:0',
      to: PAYEE,
      receivedAtomic: 9_950_000n,
      feeReceivedAtomic: 50_000n,
      referenceTopic: keccak256(REF),
      subscriptionPeriod: { contractAddress: MANAGER, onchainId: '9', periodIndex: 2 },
    });
  });

  it('a fee leg to another address than the chain fee address counts nothing', () => {
    const elsewhere = '0x6666666666666666666666666666666666666666';
    const [p] = observePayments({ charge: [charge(5)], transfer: [transfer(6, PAYEE, 9_950_000n), transfer(7, elsewhere, 50_000n)] }, FEE);
    expect(p).toMatchObject({ kind: 'charge', receivedAtomic: 9_950_000n, feeReceivedAtomic: 0n });
  });

  it('pays only the invoice of that period of that subscription of that contract', () => {
    const [p] = observePayments({ charge: [charge(5)], transfer: [transfer(6, PAYEE, 9_950_000n)] }, FEE);
    const invoice = (period: CandidateInvoice['subscriptionPeriod']): CandidateInvoice => ({
      id: 'inv',
      settlementAddress: PAYEE,
      tokenAddress: TOKEN,
      referenceTopic: keccak256(REF),
      subscriptionPeriod: period,
      checkout: null,
      balance: { status: 'open', amountAtomic: 10_000_000n, paidAtomic: 0n },
    });
    const book = (inv: CandidateInvoice): InvoiceBook => ({ referenced: (t) => (t === inv.referenceTopic ? inv : undefined), owing: () => [], checkout: () => undefined, claim: () => true });
    const right = invoice({ contractAddress: MANAGER.toUpperCase().replace('0X', '0x'), onchainId: '9', periodIndex: 2 });
    expect(chargeKind.match(p, book(right))).toBe(right);
    expect(chargeKind.match(p, book(invoice({ contractAddress: MANAGER, onchainId: '9', periodIndex: 3 })))).toBeNull();
    expect(chargeKind.match(p, book(invoice({ contractAddress: MANAGER, onchainId: '10', periodIndex: 2 })))).toBeNull();
    expect(chargeKind.match(p, book(invoice({ contractAddress: FEE, onchainId: '9', periodIndex: 2 })))).toBeNull();
    // A plain invoice of the same reference (no subscription): not this charge's.
    expect(chargeKind.match(p, book(invoice(null)))).toBeNull();
  });
});

describe('a subscribe call', () => {
  const CHECKOUT_REF = `0x${'ab'.repeat(32)}`;
  const OPERATOR = '0x7777777777777777777777777777777777777777';
  const terms: SubscribedTerms = {
    contractAddress: MANAGER,
    onchainId: '3',
    subscriber: SUBSCRIBER,
    checkoutReference: CHECKOUT_REF,
    payee: PAYEE,
    token: TOKEN,
    amountAtomic: 10_000_000n,
    periodSeconds: 3600,
    feeBps: 50,
    feeAddress: FEE,
    operator: OPERATOR,
    startedAt: 1_700_000_000n,
    endsAt: 0n,
  };
  const checkout: CheckoutTerms = {
    id: 'subco',
    checkoutReference: CHECKOUT_REF,
    contractAddress: MANAGER.toUpperCase().replace('0X', '0x'),
    payee: PAYEE,
    token: TOKEN,
    amountAtomic: 10_000_000n,
    periodSeconds: 3600,
    feeBps: 50,
    feeAddress: FEE,
    operator: OPERATOR,
    endsAt: null,
    subscriptionId: null,
    subscriptionOnchainId: null,
  };
  const subscribed = (logIndex: number, t: Partial<SubscribedTerms> = {}): SubscribeLog => ({ ...at, logIndex, terms: { ...terms, ...t } });
  const invoiceOf = (c: CheckoutTerms): CandidateInvoice => ({
    id: 'inv',
    settlementAddress: PAYEE,
    tokenAddress: TOKEN,
    referenceTopic: keccak256(REF),
    subscriptionPeriod: null,
    checkout: c,
    balance: { status: 'open', amountAtomic: 10_000_000n, paidAtomic: 0n },
  });
  const bookOf = (inv: CandidateInvoice): InvoiceBook => {
    const claimed = new Set<string>();
    return {
      referenced: () => undefined,
      owing: () => [],
      checkout: (r) => (r === inv.checkout?.checkoutReference ? inv : undefined),
      claim: (k) => !claimed.has(k) && claimed.add(k) !== undefined,
    };
  };

  it('takes its legs (never plain transfers) and pays the checkout invoice only with the checkout terms, once', () => {
    const seen = observePayments({ subscribe: [subscribed(3)], transfer: [transfer(4, PAYEE, 9_950_000n), transfer(5, FEE, 50_000n)] }, FEE);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ kind: 'subscribe', txPosition: 'subscribe:0', receivedAtomic: 9_950_000n, feeReceivedAtomic: 50_000n, referenceTopic: null });
    const inv = invoiceOf(checkout);
    const book = bookOf(inv);
    expect(subscribeKind.match(seen[0], book)).toBe(inv);
    // The same checkout a second time in the range: nothing.
    expect(subscribeKind.match(seen[0], book)).toBeNull();
    expect(subscribeKind.invoiceKeys(seen[0])).toMatchObject({ checkoutReferences: [CHECKOUT_REF] });
  });

  it('any term changed, or a checkout that made another subscription: unmatched', () => {
    const changes: Partial<SubscribedTerms>[] = [
      { amountAtomic: 1n },
      { payee: SUBSCRIBER },
      { operator: SUBSCRIBER },
      { token: FEE },
      { periodSeconds: 60 },
      { feeBps: 0 },
      { feeAddress: SUBSCRIBER },
      { endsAt: 1_800_000_000n },
      { contractAddress: FEE },
    ];
    for (const change of changes) {
      const [p] = observePayments({ subscribe: [subscribed(3, change)], transfer: [transfer(4, PAYEE, 9_950_000n)] }, FEE);
      expect(sameTerms(p.subscribed!, checkout), JSON.stringify(change, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).toBe(false);
      expect(subscribeKind.match(p, bookOf(invoiceOf(checkout)))).toBeNull();
    }
    const [p] = observePayments({ subscribe: [subscribed(3)], transfer: [transfer(4, PAYEE, 9_950_000n)] }, FEE);
    expect(subscribeKind.match(p, bookOf(invoiceOf({ ...checkout, subscriptionId: 'sub_x', subscriptionOnchainId: '2' })))).toBeNull();
    // Its own subscription (the transaction back after a deep reorg): still its invoice.
    const own = invoiceOf({ ...checkout, subscriptionId: 'sub_x', subscriptionOnchainId: '3' });
    expect(subscribeKind.match(p, bookOf(own))).toBe(own);
  });
});
