// Adversarial property tests of the subscription contract's kinds (src/chain/kinds/subscribe.ts,
// charge.ts, pull-legs.ts) and the charge verdict (src/domain/subscriptions.ts), over seeded random
// sequences (test/helpers/seeded-random.ts: a failing seed replays). No I/O.
//
// - Subscribed and Charged logs with their legs, any log answered twice by a lying node and the
//   answer shuffled: each event counts exactly its own legs, no leg is also a plain transfer, and
//   the repeats change nothing.
// - A checkout under a random sequence of subscribe calls over random ranges (terms forged by the
//   payer, another checkout's reference, the reference replayed by a second subscription, the same
//   log read again after a reorg): only the first call with the checkout's exact terms pays it.
// - A Charged log pays a period invoice only when contract, id, period, payee and token all match.
import { encodeAbiParameters, encodeEventTopics, getAbiItem, keccak256, toEventSelector, type AbiEvent, type Hex, type RpcLog } from 'viem';
import { describe, expect, it } from 'vitest';
import type { PublicClient } from 'viem';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { cancelKind } from '../../src/chain/kinds/cancel.js';
import { chargeKind, type ChargeLog } from '../../src/chain/kinds/charge.js';
import type { ChainRpc } from '../../src/chain/rpc.js';
import type { Chain } from '../../src/domain/chains.js';
import type { CandidateInvoice, CheckoutTerms, InvoiceBook, SubscribedTerms, TransferLog } from '../../src/chain/kinds/kind.js';
import { subscribeKind, type SubscribeLog } from '../../src/chain/kinds/subscribe.js';
import { observePayments, type ObservedPayment } from '../../src/chain/observe.js';
import { periodChargeVerdict } from '../../src/domain/subscriptions.js';
import { seededRandom, type Random } from '../helpers/seeded-random.js';

const MANAGER = '0x5555555555555555555555555555555555555555';
const OTHER_CONTRACT = '0x5555555555555555555555555555555555555556';
const TOKEN = '0x1111111111111111111111111111111111111111';
const OTHER_TOKEN = '0x1111111111111111111111111111111111111112';
const PAYEE = '0x2222222222222222222222222222222222222222';
const OTHER_PAYEE = '0x2222222222222222222222222222222222222223';
const FEE = '0x3333333333333333333333333333333333333333';
const OPERATOR = '0x7777777777777777777777777777777777777777';
const PAYERS = ['0x4444444444444444444444444444444444444441', '0x4444444444444444444444444444444444444442', '0x4444444444444444444444444444444444444443'];
const STRANGER = '0x9999999999999999999999999999999999999999';
const SEEDS = [11, 12, 13, 14, 15, 16, 17, 18];

const hex = (n: number, bytes: number) => `0x${n.toString(16).padStart(bytes * 2, '0')}`;
const fee = (amount: bigint, bps: number) => (amount * BigInt(bps)) / 10_000n;

describe('pulled legs under a lying node (seeded random transactions, logs answered twice and shuffled)', () => {
  interface Pull {
    kind: 'subscribe' | 'charge';
    payer: string;
    payee: string;
    amount: bigint;
    feeBps: number;
    /** Where the fee went: the chain's fee address, or elsewhere (counts nothing). */
    feeTo: string;
  }
  /**
   * A transaction: a few pulls of one kind (the contract's calls are the relayer's charges, or a
   * wallet's subscribes batched), and plain transfers between them from someone else. (A plain
   * transfer by the subscriber itself right after a subscribe without fee would be taken as its
   * fee leg: counted nowhere, never counted twice; see the report of this file's commit.)
   */
  function randomTx(r: Random): (Pull | { kind: 'transfer'; to: string; value: bigint })[] {
    const kind = r.pick(['subscribe', 'charge'] as const);
    return Array.from({ length: r.int(1, 4) }, () =>
      r.chance(0.3)
        ? { kind: 'transfer' as const, to: r.pick([PAYEE, OTHER_PAYEE]), value: BigInt(r.int(1, 10 ** 7)) }
        : {
            kind,
            payer: r.pick(PAYERS),
            payee: r.pick([PAYEE, OTHER_PAYEE]),
            amount: BigInt(r.int(1, 10 ** 8)),
            feeBps: r.pick([0, 1, 50, 1000]),
            feeTo: r.chance(0.8) ? FEE : OTHER_PAYEE,
          },
    );
  }

  for (const seed of SEEDS) {
    it(`seed ${seed}: each event counts its own legs, once; no leg is a plain transfer; repeats change nothing`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 150; round++) {
        const txs = Array.from({ length: r.int(1, 4) }, (_, n) => ({ hash: hex(seed * 1_000_000 + round * 10 + n, 32), steps: randomTx(r) }));
        const subscribe: SubscribeLog[] = [];
        const charge: ChargeLog[] = [];
        const transfer: TransferLog[] = [];
        const expected: { kind: string; received: bigint; feeReceived: bigint }[] = [];
        const plain: bigint[] = [];
        let logIndex = 0;
        let id = 0;
        for (const tx of txs) {
          const at = { txHash: tx.hash, blockNumber: 10n, blockHash: '0xb10', blockTimestamp: null };
          const leg = (from: string, to: string, value: bigint) => transfer.push({ ...at, logIndex: logIndex++, tokenAddress: TOKEN, from, to, value });
          for (const s of tx.steps) {
            if (s.kind === 'transfer') {
              leg(STRANGER, s.to, s.value);
              plain.push(s.value);
              continue;
            }
            const f = fee(s.amount, s.feeBps);
            if (s.kind === 'subscribe') {
              subscribe.push({
                ...at,
                logIndex: logIndex++,
                terms: {
                  contractAddress: MANAGER, onchainId: String(++id), subscriber: s.payer, checkoutReference: hex(id, 32), payee: s.payee, token: TOKEN,
                  amountAtomic: s.amount, periodSeconds: 3600, feeBps: s.feeBps, feeAddress: s.feeTo, operator: OPERATOR, startedAt: 1n, endsAt: 0n,
                },
              });
            } else {
              charge.push({ ...at, logIndex: logIndex++, contractAddress: MANAGER, onchainId: BigInt(++id), periodIndex: r.int(1, 9), paymentReference: hex(id, 8) });
            }
            // The contract's pull: the payee's share, then the fee when it did not round to zero.
            leg(s.payer, s.payee, s.amount - f);
            if (f > 0n) leg(s.payer, s.feeTo, f);
            expected.push({ kind: s.kind, received: s.amount - f, feeReceived: s.feeTo === FEE ? f : 0n });
          }
        }
        const summary = (seen: ObservedPayment[]) => seen.map((o) => ({ kind: o.kind, position: `${o.txHash}|${o.txPosition}`, received: o.receivedAtomic, feeReceived: o.feeReceivedAtomic }));
        const honest = observePayments({ subscribe, charge, transfer }, FEE);
        const pulls = honest.filter((o) => o.kind !== 'transfer');
        expect(pulls.map((o) => ({ kind: o.kind, received: o.receivedAtomic, feeReceived: o.feeReceivedAtomic }))).toEqual(expected);
        // Only what was sent by itself is a plain transfer: no pull's leg, and never its fee leg.
        expect(honest.filter((o) => o.kind === 'transfer').map((o) => o.receivedAtomic)).toEqual(plain);

        // The lying node: random logs twice, the answer shuffled.
        const twice = <T>(list: T[]) => shuffle(r, list.flatMap((l) => (r.chance(0.4) ? [l, { ...l }] : [l])));
        const lying = observePayments({ subscribe: twice(subscribe), charge: twice(charge), transfer: twice(transfer) }, FEE);
        expect(summary(lying)).toEqual(summary(honest));
      }
    });
  }
});

function shuffle<T>(r: Random, list: T[]): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = r.int(0, i);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

describe('a checkout under random subscribe calls over random ranges (seeded)', () => {
  const REFERENCE = `0x${'ab'.repeat(32)}`;
  const ANOTHER_REFERENCE = `0x${'cd'.repeat(32)}`;
  const exact: Omit<SubscribedTerms, 'onchainId' | 'subscriber' | 'startedAt'> = {
    contractAddress: MANAGER,
    checkoutReference: REFERENCE,
    payee: PAYEE,
    token: TOKEN,
    amountAtomic: 10_000_000n,
    periodSeconds: 3600,
    feeBps: 50,
    feeAddress: FEE,
    operator: OPERATOR,
    endsAt: 0n,
  };
  /** What a payer may change in the terms they sign (each alone or together). */
  const forgeries: ((t: SubscribedTerms) => SubscribedTerms)[] = [
    (t) => ({ ...t, payee: OTHER_PAYEE }),
    (t) => ({ ...t, amountAtomic: t.amountAtomic - 1n }),
    (t) => ({ ...t, amountAtomic: 1n }),
    (t) => ({ ...t, token: OTHER_TOKEN }),
    (t) => ({ ...t, periodSeconds: t.periodSeconds * 12 }),
    (t) => ({ ...t, feeBps: 0 }),
    (t) => ({ ...t, feeAddress: t.subscriber }),
    (t) => ({ ...t, operator: t.subscriber }),
    (t) => ({ ...t, endsAt: 1_700_000_100n }),
    (t) => ({ ...t, contractAddress: OTHER_CONTRACT }),
    (t) => ({ ...t, checkoutReference: ANOTHER_REFERENCE }),
  ];

  for (const seed of SEEDS) {
    it(`seed ${seed}: only the first call with the exact terms pays the checkout; forged terms, another checkout's reference and replays pay nothing`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 100; round++) {
        // The checkout as the database holds it between ranges: the subscription the first match made.
        const checkout: CheckoutTerms = { id: 'subco', ...exact, endsAt: null, subscriptionId: null, subscriptionOnchainId: null };
        const invoice: CandidateInvoice = {
          id: 'inv',
          settlementAddress: PAYEE,
          tokenAddress: TOKEN,
          referenceTopic: keccak256(hex(1, 8) as `0x${string}`),
          subscriptionPeriod: null,
          checkout,
          balance: { status: 'open', amountAtomic: 10_000_000n, paidAtomic: 0n },
        };
        // A random sequence of calls: each from a random payer, exact or forged.
        const calls = Array.from({ length: r.int(1, 8) }, (_, n) => {
          let terms: SubscribedTerms = { ...exact, onchainId: String(round * 100 + n + 1), subscriber: r.pick(PAYERS), startedAt: BigInt(1_700_000_000 + n) };
          if (r.chance(0.6)) for (let k = r.int(1, 3); k > 0; k--) terms = r.pick(forgeries)(terms);
          return terms;
        });
        // A lying or reorging node: some calls read again in a later range.
        const reads = calls.flatMap((t, n) => (r.chance(0.3) ? [n, n] : [n])).map((n) => calls[n]);
        const firstExact = calls.find((t) => JSON.stringify(t, big) === JSON.stringify({ ...t, ...exact }, big));

        const matched: string[] = [];
        let at = 0;
        while (at < reads.length) {
          // One range: a fresh book over the checkout's state as the last range committed it.
          const range = reads.slice(at, (at += r.int(1, 3)));
          const claimed = new Set<string>();
          const book: InvoiceBook = {
            referenced: () => undefined,
            owing: () => [],
            checkout: (ref) => (ref === checkout.checkoutReference ? { ...invoice, checkout: { ...checkout } } : undefined),
            claim: (k) => !claimed.has(k) && claimed.add(k) !== undefined,
          };
          for (const terms of range) {
            const legsOf = (t: SubscribedTerms): TransferLog[] => {
              const f = fee(t.amountAtomic, t.feeBps);
              const pos = { txHash: `0x${t.onchainId}`, blockNumber: 10n, blockHash: '0xb10', blockTimestamp: null };
              return [
                { ...pos, logIndex: 1, tokenAddress: t.token, from: t.subscriber, to: t.payee, value: t.amountAtomic - f },
                ...(f > 0n ? [{ ...pos, logIndex: 2, tokenAddress: t.token, from: t.subscriber, to: t.feeAddress, value: f }] : []),
              ];
            };
            const [p] = observePayments({ subscribe: [{ txHash: `0x${terms.onchainId}`, blockNumber: 10n, blockHash: '0xb10', blockTimestamp: null, logIndex: 0, terms }], transfer: legsOf(terms) }, FEE);
            if (subscribeKind.match(p, book) === null) continue;
            matched.push(terms.onchainId);
            // What the range's commit leaves: the checkout names its subscription.
            checkout.subscriptionId ??= `sub_${terms.onchainId}`;
            checkout.subscriptionOnchainId ??= terms.onchainId;
          }
        }
        // One subscription, of the first exact call; its log read again (a rescan) is still its own.
        expect(new Set(matched)).toEqual(new Set(firstExact ? [firstExact.onchainId] : []));
        expect(checkout.subscriptionOnchainId).toBe(firstExact?.onchainId ?? null);
      }
    });
  }
});

const big = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);

describe('a Charged log against period invoices (seeded)', () => {
  for (const seed of SEEDS) {
    it(`seed ${seed}: pays the invoice only when contract, subscription id, period, payee and token are all the invoice's`, () => {
      const r = seededRandom(seed);
      for (let round = 0; round < 300; round++) {
        const reference = hex(round + 1, 8);
        const contract = r.pick([MANAGER, MANAGER.toUpperCase().replace('0X', '0x'), OTHER_CONTRACT]);
        const onchainId = r.pick([7n, 8n]);
        const periodIndex = r.int(1, 3);
        const payee = r.pick([PAYEE, PAYEE, OTHER_PAYEE]);
        const token = r.pick([TOKEN, TOKEN, OTHER_TOKEN]);
        const at = { txHash: hex(round, 32), blockNumber: 10n, blockHash: '0xb10', blockTimestamp: null };
        const [p] = observePayments(
          {
            charge: [{ ...at, logIndex: 0, contractAddress: contract, onchainId, periodIndex, paymentReference: reference }],
            transfer: [{ ...at, logIndex: 1, tokenAddress: token, from: PAYERS[0], to: payee, value: 9_950_000n }],
          },
          FEE,
        );
        const invoice: CandidateInvoice = {
          id: 'inv',
          settlementAddress: PAYEE,
          tokenAddress: TOKEN,
          referenceTopic: keccak256(reference as `0x${string}`),
          subscriptionPeriod: r.chance(0.1) ? null : { contractAddress: MANAGER, onchainId: '7', periodIndex: 2 },
          checkout: null,
          balance: { status: 'open', amountAtomic: 10_000_000n, paidAtomic: 0n },
        };
        const book: InvoiceBook = { referenced: (t) => (t === invoice.referenceTopic ? invoice : undefined), owing: () => [], checkout: () => undefined, claim: () => true };
        const shouldPay =
          invoice.subscriptionPeriod !== null && contract.toLowerCase() === MANAGER && onchainId === 7n && periodIndex === 2 && payee === PAYEE && token === TOKEN;
        expect(chargeKind.match(p, book), JSON.stringify({ contract, onchainId, periodIndex, payee, token, period: invoice.subscriptionPeriod }, big)).toBe(shouldPay ? invoice : null);
      }
    });
  }
});

describe('periodChargeVerdict', () => {
  const inv = (status: string, paid: bigint, pending: bigint) => ({ status, amountAtomic: 10_000_000n, paidAtomic: paid, pendingAtomic: pending });
  it('a paid or voided period is settled; one a payment on its way would settle is not charged; dust on its way holds nothing up', () => {
    expect(periodChargeVerdict(inv('paid', 10_000_000n, 0n))).toBe('settled');
    expect(periodChargeVerdict(inv('void', 0n, 10_000_000n))).toBe('settled');
    expect(periodChargeVerdict(inv('open', 0n, 10_000_000n))).toBe('payment_pending');
    expect(periodChargeVerdict(inv('overdue', 4_000_000n, 6_000_000n))).toBe('payment_pending');
    expect(periodChargeVerdict(inv('open', 0n, 0n))).toBe('charge');
    // Dust anyone can send to the invoice's reference, block after block, must not stall the charge.
    expect(periodChargeVerdict(inv('open', 0n, 1n))).toBe('charge');
    expect(periodChargeVerdict(inv('open', 0n, 9_999_999n))).toBe('charge');
  });
});

describe("a lying node answering the contract's logs from another address", () => {
  // The node is asked for the manager's logs only; it answers each kind's log twice, once from the
  // manager and once from a contract anyone could deploy, emitting the same event.
  const chain = { chainId: 31337, subscriptionManager: MANAGER } as Pick<Chain, 'chainId' | 'subscriptionManager'> as Chain;
  const base = { transactionHash: hex(1, 32), blockNumber: '0xa', blockHash: hex(0xb10, 32), transactionIndex: '0x0', removed: false };
  const args: Record<string, unknown> = {
    id: 7n, subscriber: PAYERS[0], checkoutReference: hex(5, 32), payee: PAYEE, token: TOKEN, amount: 10n, period: 3600, feeBps: 0,
    feeAddress: FEE, operator: OPERATOR, startedAt: 1n, endsAt: 0n, periodIndex: 2, paymentReference: hex(9, 8), by: PAYERS[0],
  };
  const lying: ChainRpc = {
    blockNumber: () => Promise.resolve(10n),
    block: () => Promise.reject(new Error('not asked')),
    blockIfAny: () => Promise.resolve(null),
    getLogs: <T>(_narrow: boolean, query: (client: PublicClient) => Promise<T>) =>
      query({
        // eth_getLogs: the asked event (by its selector), emitted by the manager and by the other contract.
        request: ({ params: [filter] }: { params: [{ topics: Hex[] }] }) => {
          const event = EVENTS.find((e) => toEventSelector(e) === filter.topics[0])!;
          const indexed = Object.fromEntries(event.inputs.filter((i) => i.indexed).map((i) => [i.name!, args[i.name!]]));
          const data = event.inputs.filter((i) => !i.indexed);
          const log = (address: string, logIndex: number): RpcLog => ({
            ...base,
            address: address as Hex,
            logIndex: `0x${logIndex}`,
            topics: encodeEventTopics({ abi: [event], eventName: event.name, args: indexed } as Parameters<typeof encodeEventTopics>[0]) as [Hex, ...Hex[]],
            data: data.length ? encodeAbiParameters(data, data.map((i) => args[i.name!])) : '0x',
          }) as RpcLog;
          return Promise.resolve([log(MANAGER, 0), log(OTHER_CONTRACT, 1)]);
        },
      } as unknown as PublicClient),
  };
  const EVENTS: AbiEvent[] = (['Subscribed', 'Charged', 'Canceled'] as const).map((name) => getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name }));

  it('every kind of the contract keeps only the manager\'s logs', async () => {
    for (const kind of [subscribeKind, chargeKind, cancelKind]) {
      const logs = await kind.fetch(lying, { chain, recipients: [] }, 10n, 10n, false);
      expect(logs.map((l) => l.logIndex), kind.name).toEqual([0]);
    }
  });
});
