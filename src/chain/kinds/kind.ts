// What a kind of chain log is (as a Ponder source is): how its logs of a range are fetched and
// decoded, what payments they make, which invoices a payment of it may pay and how it is matched to
// one, and what fee the rule expects of it. One module per kind (proxy.ts, transfer.ts), listed
// once in index.ts; the watcher (cursor, ranges, pending window, reorgs) and the detector (one
// transaction per range, applying, events) never name a kind.
import type { Chain } from '../../domain/chains.js';
import type { PoolClient } from '../../db/pool.js';
import type { InvoiceBalance } from '../../domain/payments.js';
import type { ChainRpc, LogPosition } from '../rpc.js';

/** What one scan of a chain watches. */
export interface ScanScope {
  chain: Chain;
  /** The settlement addresses of the chain's environment (lower case). */
  recipients: readonly string[];
}

/** A token's Transfer log: a plain transfer's, or one leg of a payment made through a contract. */
export interface TransferLog extends LogPosition {
  tokenAddress: string;
  from: string;
  to: string;
  value: bigint;
}

/**
 * The range's Transfer logs (the transfer kind's own), each taken by at most one payment: a
 * contract's payment (a proxy call) moves the token with Transfer logs of its own transaction,
 * and those are its legs, never plain transfers too. Kinds observe in the list's order; the
 * transfer kind comes last and takes what is left.
 */
export class TransferLegs {
  private readonly byTx = new Map<string, TransferLog[]>();
  private readonly taken = new Set<TransferLog>();

  constructor(logs: readonly TransferLog[]) {
    for (const t of logs) {
      const same = this.byTx.get(t.txHash);
      if (same) same.push(t);
      else this.byTx.set(t.txHash, [t]);
    }
    for (const list of this.byTx.values()) list.sort((a, b) => a.logIndex - b.logIndex);
  }

  /** The transaction's Transfer logs no payment took yet, in log order. */
  free(txHash: string): TransferLog[] {
    return (this.byTx.get(txHash) ?? []).filter((t) => !this.taken.has(t));
  }

  /** Every transaction's free Transfer logs, each transaction's in log order. */
  *allFree(): Iterable<TransferLog[]> {
    for (const txHash of this.byTx.keys()) yield this.free(txHash);
  }

  take(t: TransferLog | undefined): void {
    if (t) this.taken.add(t);
  }
}

export interface ObserveContext {
  legs: TransferLegs;
  /** The chain's configured fee address: a fee counts only when it went there. */
  feeAddress: string | null;
}

/** A payment as the logs of a range show it, of any kind. */
export interface ObservedPayment {
  /** The kind's name (index.ts): the payment row's `kind`. */
  kind: string;
  txHash: string;
  logIndex: number;
  /**
   * The payment's place within its transaction, which a re-inclusion of the same transaction in
   * another block keeps (the block's log index does not): `<kind>:...`, unique per transaction.
   */
  txPosition: string;
  blockNumber: bigint;
  blockHash: string;
  blockTimestamp: bigint | null;
  tokenAddress: string;
  from: string | null;
  to: string;
  /** What the log states was paid (proxy: the call's amount as claimed; transfer: the value). */
  amountAtomic: bigint;
  /** What the log states as fee (proxy: the call's feeAmount as claimed; else 0). */
  feeAtomic: bigint;
  feeAddress: string | null;
  /** keccak256 of the payment reference, when the kind carries one. */
  referenceTopic: string | null;
  /** What a Transfer log of the transaction shows reached `to` for this payment (0 when none does). */
  receivedAtomic: bigint;
  /** What a Transfer log shows reached the chain's own fee address as this payment's fee (else 0). */
  feeReceivedAtomic: bigint;
  /** A subscription contract's charge: which subscription (the contract and its id there) and which period it says it pays. */
  subscriptionPeriod?: SubscriptionPeriod;
  /** A subscription contract's subscribe call: the terms its Subscribed log states (matched to a checkout's). */
  subscribed?: SubscribedTerms;
}

/** What a Subscribed log states: the subscription the contract made and the terms it holds. */
export interface SubscribedTerms {
  contractAddress: string;
  /** The uint256 id, as a decimal string. */
  onchainId: string;
  subscriber: string;
  /** 0x + 64 hex, lower case. */
  checkoutReference: string;
  payee: string;
  token: string;
  amountAtomic: bigint;
  periodSeconds: number;
  feeBps: number;
  feeAddress: string;
  operator: string;
  /** Unix seconds (the block's time). */
  startedAt: bigint;
  /** Unix seconds; 0 when it never ends. */
  endsAt: bigint;
}

/** The terms a subscription checkout asked the wallet to subscribe with, and whether a subscription was made of it. */
export interface CheckoutTerms {
  id: string;
  checkoutReference: string;
  contractAddress: string;
  payee: string;
  token: string;
  amountAtomic: bigint;
  periodSeconds: number;
  feeBps: number;
  feeAddress: string;
  operator: string;
  /** null: never ends. */
  endsAt: Date | null;
  subscriptionId: string | null;
  /** Its on-chain id (the checkout's contract's), when it has one. */
  subscriptionOnchainId: string | null;
}

export interface SubscriptionPeriod {
  contractAddress: string;
  /** The uint256 id, as a decimal string. */
  onchainId: string;
  periodIndex: number;
}

/** An invoice a payment may pay, as the detector holds it while it records a range. */
export interface CandidateInvoice {
  readonly id: string;
  readonly settlementAddress: string | null;
  readonly tokenAddress: string;
  readonly referenceTopic: string | null;
  /** A subscription's period invoice: its subscription's contract and id there, and the period. */
  readonly subscriptionPeriod: SubscriptionPeriod | null;
  /** The invoice of a subscription checkout (its first period): the checkout's terms. */
  readonly checkout: CheckoutTerms | null;
  /** Its status and amounts as the payments recorded so far in this range left them. */
  readonly balance: InvoiceBalance;
}

/** The invoices locked for a range (those the kinds' `wants` named), kept current as payments apply. */
export interface InvoiceBook {
  /** The invoice of a payment reference. */
  referenced(topic: string): CandidateInvoice | undefined;
  /** The open or overdue invoices sent to `to` in `token` whose remaining amount is `remaining` (an index, not the rule). */
  owing(to: string, token: string, remaining: bigint): CandidateInvoice[];
  /** The invoice of a subscription checkout, by its checkout reference (0x + 64 hex, lower case). */
  checkout(reference: string): CandidateInvoice | undefined;
  /** True the first time `key` is claimed in this range: what may happen once (a checkout used) happens for the first log only. */
  claim(key: string): boolean;
}

/** Which invoices a payment may pay, to lock them before matching: by reference, or (plain transfers) by address. */
export interface InvoiceKeys {
  referenceTopics: string[];
  /** Every open invoice sent to these addresses (a kind matching by address alone). */
  settlementAddresses: string[];
  /** The open invoices sent to `address` owing exactly `remainingAtomic`: all a plain transfer can settle (a range's cost stays independent of how many are open). */
  owing?: { address: string; remainingAtomic: bigint }[];
  /** The invoices of these subscription checkouts (by checkout reference). */
  checkoutReferences?: string[];
}

/** A payment matched to an invoice, confirmed in this range (recorded for the first time as confirmed). */
export interface ConfirmedMatch {
  payment: ObservedPayment;
  invoiceId: string;
  accountId: string;
  /** The invoice's status as the range found it, before this payment applied. */
  invoiceStatus: InvoiceBalance['status'];
}

/** A log that is no payment but something to record once confirmed (a subscription canceled). */
export interface ObservedRecord extends LogPosition {
  kind: string;
}

export interface PaymentLogKind<Name extends string = string, L extends LogPosition = LogPosition> {
  readonly name: Name;
  /**
   * Its logs of [from, to], decoded; none when the chain has nothing of this kind to watch.
   * `narrow`: [from, to] is one block the provider refused whole: ask in the smallest pieces
   * the kind has (one address at a time), each without a response size limit.
   */
  fetch(rpc: ChainRpc, scope: ScanScope, from: bigint, to: bigint, narrow: boolean): Promise<L[]>;
  /** Its payments among its logs (each log once, a transaction in one block), taking its Transfer legs from `ctx.legs`. */
  observe(logs: readonly L[], ctx: ObserveContext): ObservedPayment[];
  /** Set on the one kind whose logs are the Transfer logs other kinds take their legs from. */
  legs?(logs: readonly L[]): readonly TransferLog[];
  invoiceKeys(p: ObservedPayment): InvoiceKeys;
  /** The invoice it pays among those locked, or null (unmatched). */
  match(p: ObservedPayment, book: InvoiceBook): CandidateInvoice | null;
  /** The fee the account's rate asks of a payment of this kind that moved `total` (received + fee received); null when the kind collects none. */
  expectedFeeAtomic(total: bigint, feeBps: number): bigint | null;
  /**
   * What its matched payments make once confirmed, in the range's transaction, BEFORE the invoices'
   * balances are written (a subscription made here is there when its invoice turns paid).
   */
  confirmed?(tx: PoolClient, chain: Chain, matched: readonly ConfirmedMatch[]): Promise<void>;
  /** A kind whose logs are no payments: what of them is recorded once confirmed (observe returns none). */
  records?(logs: readonly L[]): ObservedRecord[];
  /** Records its confirmed records of a range (idempotent: a range may be read again after a reorg). */
  record?(tx: PoolClient, chain: Chain, records: readonly ObservedRecord[], blockTimes: ReadonlyMap<bigint, Date>): Promise<{ recorded: number; ignored: number }>;
}

/** A kind, checked against what a kind declares (its methods take its own log type; the list holds kinds of several). */
export function defineKind<const Name extends string, L extends LogPosition>(kind: PaymentLogKind<Name, L>): PaymentLogKind<Name, L> {
  return kind;
}

/** The log type of a kind. */
export type LogOf<K> = K extends PaymentLogKind<string, infer L> ? L : never;
