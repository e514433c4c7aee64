// Records what a scanned range of a chain holds, in ONE transaction with the cursor: the payment
// rows, what confirmed ones do to their invoices (the status change fires invoice.paid, the
// receipt and the reminders' stop), and every event. The cursor row's lock serialises writers of
// a chain, and (chain_id, tx_hash, tx_position) is unique: a repeated run, a run killed half-way,
// two workers at once or the same transaction re-included in another block after a reorg never
// make a second row or a second event. What counts is what reached the merchant (observe.ts and
// countedAtomic in the domain), never the proxy event's claim.
import { createHash } from 'node:crypto';
import { compareScannedFor, type Chain, type ScannedFor } from '../domain/chains.js';
import { newId } from '../domain/ids.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { applyPaymentTo, dustFloorAtomic, remainingAtomic, sameAddress, type PaymentOutcome } from '../domain/payments.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import {
  emitPartiallyPaid,
  emitPaymentEvents,
  insertPayments,
  lockCursor,
  lockExistingPayments,
  lockPayableInvoices,
  markRescan,
  moveConfirmedPayments,
  moveCursor,
  ownersOfAddresses,
  recordHead,
  resetHead,
  removeVanishedPayments,
  reorgOutPayments,
  reorgOutPaymentsById,
  updatePayments,
  writeInvoiceBalances,
  type ExistingPayment,
  type InvoiceBalanceWrite,
  type PayableInvoiceRow,
  type PaymentRow,
  type PaymentWrite,
  type ReorgedOutRow,
} from '../db/payments.js';
import { kindNamed } from './kinds/index.js';
import type { CandidateInvoice, CheckoutTerms, ConfirmedMatch, InvoiceBook, ObservedPayment, ObservedRecord } from './kinds/kind.js';
import type { CheckoutTermsRow } from '../db/subscription-chain.js';
import { presentPayment } from './payment-object.js';

export interface RangeToRecord {
  /** First block of the range. */
  from: bigint;
  /** Last block (for the pending window: the head this run read). */
  to: bigint;
  /** Below the safe head: payments are confirmed and applied. Above: pending. */
  final: boolean;
  observed: ObservedPayment[];
  /** Block times of the range's payments (paid_at is the block's time). */
  blockTimes: Map<bigint, Date>;
  head: bigint;
  safe: bigint;
  /** The cursor this run read; another value under the lock means another worker moved it. */
  expectedCursor: bigint;
  /** final: where the cursor goes (the range's last block, its hash and time, the checkpoints). */
  cursorTo?: { block: bigint; hash: string | null; time: Date | null; checkpoints: [string, string][] };
  /** What this run scanned for: another set on the cursor (under its lock) means this run may not move it. */
  scannedFor?: ScannedFor;
  /** Logs that are no payments but are recorded once confirmed (kinds with `record`); final ranges only. */
  records?: ObservedRecord[];
  /** Pending payments not observed whose block is still on the chain (by hash): kept, never announced removed. */
  stillOnChain?: { txHash: string; txPosition: string }[];
}

/** Why a log made no payment: a zero-value transfer, or dust that no invoice claims. */
export type IgnoredReason = 'zero_value' | 'dust';

/** A confirmed payment whose block left the chain in a reorg deeper than the confirmations. */
export interface ReorgedOut {
  id: string;
  accountId: string;
  invoiceId: string | null;
  txHash: string;
  blockNumber: string;
  /** What it had counted toward its invoice, taken off again; null when it counted nothing. */
  uncountedAtomic: string | null;
}

export interface RangeOutcome {
  recorded: { kind: ObservedPayment['kind']; status: 'pending' | 'confirmed' | 'removed' | 'reorged_out' }[];
  applied: number;
  /** Logs that made no payment, by reason (final ranges only: the pending window is read again each run). */
  ignored: Record<IgnoredReason, number>;
  reorgedOut: ReorgedOut[];
  /** Logs of kinds that make something once confirmed which made nothing, by kind and reason (final ranges only). */
  ignoredLogs: { kind: string; reason: string; count: number }[];
}

interface InvoiceState {
  row: PayableInvoiceRow;
  status: InvoiceStatus;
  paid: bigint;
  paidAt: string | null;
  /** The invoice's own fee, and what of it applied payments counted: fees count up to it, no further. */
  fee: bigint;
  feeCounted: bigint;
  changed: boolean;
}

const lower = (a: string) => a.toLowerCase();

/**
 * What a payment's log says, apart from where it sits (block, log index, position): the same
 * signed transaction re-included in another block after a reorg is the same payment only if this
 * is unchanged. On another chain state it may pay another address, another amount, under another
 * reference or for another period.
 */
function observedDigest(o: ObservedPayment): string {
  const { txHash: _t, logIndex: _l, txPosition: _p, blockNumber: _n, blockHash: _h, blockTimestamp: _s, ...said } = o;
  // A subscribe's start is its block's time: where it sits, not what it says.
  if (said.subscribed) said.subscribed = { ...said.subscribed, startedAt: 0n };
  const canonical = JSON.stringify(said, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : typeof v === 'string' ? v.toLowerCase() : v));
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * Whether a confirmed row's log, seen again, says what it said: by its digest; a row from before
 * the digest by what it stored of the log (its reference is the invoice's, not the log's: a row
 * that old is taken at its recipient, token, sender and amounts).
 */
function saysTheSame(e: ExistingPayment, o: ObservedPayment): boolean {
  if (e.observed_digest !== null) return e.observed_digest === observedDigest(o);
  const same = (a: string | null, b: string | null) => (a ?? '').toLowerCase() === (b ?? '').toLowerCase();
  return (
    same(e.to_address, o.to) && same(e.token_address, o.tokenAddress) && same(e.from_address, o.from) && same(e.fee_address, o.feeAddress) &&
    e.amount_atomic === o.amountAtomic.toString() && e.fee_atomic === o.feeAtomic.toString() &&
    e.received_atomic === o.receivedAtomic.toString() && e.fee_received_atomic === o.feeReceivedAtomic.toString()
  );
}

/** payment.reorged_out for each, and the range's outcome counts them. */
async function announceReorgedOut(tx: PoolClient, chain: Chain, head: bigint, gone: ReorgedOutRow[]): Promise<void> {
  await emitPaymentEvents(
    tx,
    gone.map((p) => ({ accountId: p.account_id, environment: p.environment, type: 'payment.reorged_out', id: p.id, object: presentPayment(p, [chain], head) })),
  );
}

function countReorgedOut(outcome: RangeOutcome, gone: ReorgedOutRow[]): void {
  for (const p of gone) {
    outcome.recorded.push({ kind: p.kind, status: 'reorged_out' });
    outcome.reorgedOut.push({ id: p.id, accountId: p.account_id, invoiceId: p.invoice_id, txHash: p.tx_hash, blockNumber: p.block_number, uncountedAtomic: p.uncounted_atomic });
  }
}
const key = (txHash: string, txPosition: string) => `${txHash}:${txPosition}`;
const legacyKey = (txHash: string, logIndex: number) => `${txHash}:log:${logIndex}`;
const transferKey = (to: string, token: string, remaining: bigint) => `${lower(to)}|${lower(token)}|${remaining}`;

/** Null when another worker moved the cursor meanwhile (nothing written: its run covers the range). */
export async function recordRange(pool: Pool, chain: Chain, range: RangeToRecord): Promise<RangeOutcome | null> {
  return withTransaction(pool, async (tx) => {
    const cursor = await lockCursor(tx, chain.chainId, BigInt(chain.startBlock) - 1n);
    if (BigInt(cursor.block_number) !== range.expectedCursor) return null;
    if (range.scannedFor && cursor.scanned_for && compareScannedFor(cursor.scanned_for, range.scannedFor) !== 'same') return null;
    // A run that read an older head than one already recorded (two workers, overlapping runs)
    // must not turn the newer run's pending payments into removed ones.
    if (!range.final && cursor.head_block !== null && BigInt(cursor.head_block) > range.head) {
      return { recorded: [], applied: 0, ignored: { zero_value: 0, dust: 0 }, reorgedOut: [], ignoredLogs: [] };
    }
    // A confirmed payment not on the chain any more: a reorg deeper than the confirmations (the
    // watcher rewound to the fork and rescans). It stops counting, before this range's payments
    // apply, and the merchant is told; should its transaction come back, it is this row again and
    // counts again, once.
    const rescan = range.final && cursor.rescan_to !== null && range.from <= BigInt(cursor.rescan_to);
    const gone = rescan
      ? await reorgOutPayments(
          tx,
          chain.chainId,
          range.from,
          range.to,
          range.observed.flatMap((o) => [
            { txHash: o.txHash, txPosition: o.txPosition },
            { txHash: o.txHash, txPosition: `log:${o.logIndex}` },
          ]),
        )
      : [];
    await announceReorgedOut(tx, chain, range.head, gone);
    const { outcome, kept } = await recordPayments(tx, chain, range);
    if (range.final) await recordRecords(tx, chain, range.records ?? [], range.blockTimes, outcome);
    countReorgedOut(outcome, gone);
    const removed = await removeVanishedPayments(tx, chain.chainId, range.from, range.to, [...kept, ...(range.stillOnChain ?? [])]);
    await emitPaymentEvents(
      tx,
      removed.map((p) => ({ accountId: p.account_id, environment: p.environment, type: 'payment.removed', id: p.id, object: presentPayment(p, [chain], range.head) })),
    );
    for (const p of removed) outcome.recorded.push({ kind: p.kind, status: 'removed' });
    if (range.cursorTo) await moveCursor(tx, chain.chainId, range.cursorTo);
    await recordHead(tx, chain.chainId, range.head, range.safe);
    return outcome;
  });
}

/** The payments of the range, and the (tx, position) keys of those the chain holds that are (or may be) recorded. */
async function recordPayments(
  tx: PoolClient,
  chain: Chain,
  range: RangeToRecord,
): Promise<{ outcome: RangeOutcome; kept: { txHash: string; txPosition: string }[] }> {
  const outcome: RangeOutcome = { recorded: [], applied: 0, ignored: { zero_value: 0, dust: 0 }, reorgedOut: [], ignoredLogs: [] };
  const kept: { txHash: string; txPosition: string }[] = [];
  // Anyone can emit Transfer(x, settlement, 0) from a loop, or call the proxy with amount 0 naming
  // a known reference: it moves nothing and is never a payment (no row, no event, no email). Such
  // a log is still looked up below: a known payment's transaction seen again moving nothing to
  // its recipient (re-included on another chain state) is that payment saying something else.
  const movesNothing = (o: ObservedPayment) => o.receivedAtomic + o.feeReceivedAtomic === 0n;
  const observed = range.observed;
  if (observed.length === 0) return { outcome, kept };
  const rows = await lockExistingPayments(tx, chain.chainId, observed.map((o) => ({ txHash: o.txHash, txPosition: o.txPosition, logIndex: o.logIndex })));
  const byKey = new Map(rows.map((e) => [key(e.tx_hash, e.tx_position), e]));
  const existingOf = (o: ObservedPayment) => byKey.get(key(o.txHash, o.txPosition)) ?? byKey.get(legacyKey(o.txHash, o.logIndex));
  // A confirmed row is final: seen in another block saying the same, it only moves there. A
  // pending one seen again in the same block needs nothing until it confirms.
  const moved: Parameters<typeof moveConfirmedPayments>[1] = [];
  const changed: ExistingPayment[] = [];
  const ignoreIfNothing = (o: ObservedPayment) => {
    if (!movesNothing(o)) return true;
    if (range.final) outcome.ignored.zero_value++;
    return false;
  };
  const todo = observed.filter((o) => {
    const e = existingOf(o);
    if (e === undefined) return ignoreIfNothing(o);
    const again = e.status === 'confirmed' || (!range.final && e.status !== 'removed' && e.block_hash === o.blockHash);
    if (!again) return ignoreIfNothing(o);
    const elsewhere = e.status === 'confirmed' && (e.block_hash !== o.blockHash || e.tx_position !== o.txPosition);
    // Seen elsewhere: decided once that block is final, never in the pending window (a row moved
    // onto a block that a shallow reorg then drops would count with no rescan left to look at
    // it: a review). Until then the row stays where it was confirmed, neither moved nor pending.
    if (elsewhere && !range.final) return false;
    // Saying something else: not the payment that counted. It is reorged out and matched again
    // by its kind's rule, below.
    if (elsewhere && !saysTheSame(e, o)) {
      changed.push(e);
      return ignoreIfNothing(o);
    }
    // Confirmed rows take this position below; a pending one keeps its own until it is written again.
    kept.push({ txHash: o.txHash, txPosition: e.status === 'confirmed' ? o.txPosition : e.tx_position });
    if (elsewhere) {
      moved.push({
        id: e.id,
        block_number: o.blockNumber.toString(),
        block_hash: o.blockHash,
        block_time: range.blockTimes.get(o.blockNumber)?.toISOString() ?? null,
        log_index: o.logIndex,
        tx_position: o.txPosition,
      });
    }
    return false;
  });
  await moveConfirmedPayments(tx, moved);
  if (changed.length > 0) {
    const gone = await reorgOutPaymentsById(tx, changed.map((e) => e.id));
    await announceReorgedOut(tx, chain, range.head, gone);
    countReorgedOut(outcome, gone);
    // As the rows are now: reorged out, keeping what they counted (the restore below reads it).
    for (const r of gone) Object.assign(changed.find((e) => e.id === r.id)!, { status: r.status, reorged_out_at: r.reorged_out_at });
  }
  if (todo.length === 0) return { outcome, kept };

  const keys = todo.map((o) => kindNamed(o.kind).invoiceKeys(o));
  const topics = [...new Set(keys.flatMap((k) => k.referenceTopics))];
  const targets = [...new Set(keys.flatMap((k) => k.settlementAddresses))];
  const owing = [...new Map(keys.flatMap((k) => k.owing ?? []).map((o) => [`${o.address}|${o.remainingAtomic}`, o])).values()];
  const checkoutRefs = [...new Set(keys.flatMap((k) => k.checkoutReferences ?? []))];
  // A payment reorged out and back counts again toward the invoice it had counted toward, even one
  // that stayed paid: a plain transfer would otherwise match only an open invoice owing its value.
  const restoredToOf = (o: ObservedPayment) => {
    const e = existingOf(o);
    return e?.reorged_out_at != null && e.counted_atomic !== null && e.invoice_id !== null ? e.invoice_id : null;
  };
  const restoredTo = [...new Set(todo.map(restoredToOf).filter((id): id is string => id !== null))];
  const invoices = new Map<string, InvoiceState>(
    (await lockPayableInvoices(tx, chain.chainId, topics, targets, owing, checkoutRefs, restoredTo)).map((row) => [
      row.id,
      {
        row,
        status: row.status,
        paid: BigInt(row.amount_paid_atomic),
        paidAt: null,
        fee: BigInt(row.fee_atomic ?? '0'),
        feeCounted: BigInt(row.fee_counted_atomic),
        changed: false,
      },
    ]),
  );
  const candidates = new Map<InvoiceState, CandidateInvoice>(
    [...invoices.values()].map((s) => [
      s,
      {
        id: s.row.id,
        settlementAddress: s.row.settlement_address,
        tokenAddress: s.row.token_address,
        referenceTopic: s.row.payment_reference_topic,
        subscriptionPeriod:
          s.row.subscription_contract !== null && s.row.subscription_onchain_id !== null && s.row.period_index !== null
            ? { contractAddress: s.row.subscription_contract, onchainId: s.row.subscription_onchain_id, periodIndex: s.row.period_index }
            : null,
        checkout: s.row.checkout ? checkoutTerms(s.row.checkout) : null,
        get balance() {
          return { status: s.status, amountAtomic: BigInt(s.row.amount_atomic), paidAtomic: s.paid };
        },
      },
    ]),
  );
  const byCheckout = new Map([...invoices.values()].filter((s) => s.row.checkout).map((s) => [s.row.checkout!.checkout_reference, s]));
  const claimed = new Set<string>();
  const byTopic = new Map([...invoices.values()].filter((s) => s.row.payment_reference_topic).map((s) => [s.row.payment_reference_topic!, s]));
  // Open invoices by (address, token, remaining), kept current as payments apply: scanning every
  // invoice of the address for each plain transfer is quadratic in a busy range.
  const byRemaining = new Map<string, Set<InvoiceState>>();
  const remainingKey = (s: InvoiceState) =>
    s.status === 'open' || s.status === 'overdue'
      ? transferKey(s.row.settlement_address ?? '', s.row.token_address, remainingAtomic({ amountAtomic: BigInt(s.row.amount_atomic), paidAtomic: s.paid }))
      : null;
  const indexAt = (s: InvoiceState, k: string | null) => {
    if (k === null) return;
    let bucket = byRemaining.get(k);
    if (!bucket) byRemaining.set(k, (bucket = new Set()));
    bucket.add(s);
  };
  for (const s of invoices.values()) indexAt(s, remainingKey(s));
  const book: InvoiceBook = {
    referenced: (topic) => {
      const s = byTopic.get(topic);
      return s && candidates.get(s);
    },
    owing: (to, token, remaining) => [...(byRemaining.get(transferKey(to, token, remaining)) ?? [])].map((s) => candidates.get(s)!),
    checkout: (reference) => {
      const s = byCheckout.get(reference);
      return s && candidates.get(s);
    },
    claim: (k) => !claimed.has(k) && claimed.add(k) !== undefined,
  };
  // A payment reorged out and back is matched first against the invoice it had counted toward
  // alone, by its kind's own rule, as if that invoice were open and owed what the payment moved: the
  // same transaction on another chain state may pay another address, in another token, for
  // another period, and is then no payment of that invoice (a review made a re-included proxy
  // call pay the attacker's own address and count toward the first merchant's invoice).
  const restoredBook = (s: InvoiceState, moved: bigint): InvoiceBook => {
    const c = candidates.get(s)!;
    const owingNow: CandidateInvoice = { ...c, balance: { status: 'open', amountAtomic: moved, paidAtomic: 0n } };
    return {
      referenced: (topic) => (c.referenceTopic === topic ? c : undefined),
      owing: (to, token) => (sameAddress(c.settlementAddress, to) && sameAddress(c.tokenAddress, token) ? [owingNow] : []),
      checkout: (reference) => (c.checkout?.checkoutReference === reference ? c : undefined),
      claim: book.claim,
    };
  };
  const owners = await ownersOfAddresses(tx, chain.chainId, chain.environment, [...new Set(todo.map((o) => lower(o.to)))]);

  const inserts: PaymentWrite[] = [];
  const updates: PaymentWrite[] = [];
  const partial: string[] = [];
  const confirmedMatches = new Map<string, ConfirmedMatch[]>();
  const unmatchedOf = new Map<string, number>();
  const now = new Date().toISOString();
  const floors = new Map(chain.tokens.map((t) => [lower(t.address), dustFloorAtomic(t.decimals)]));
  for (const o of todo) {
    const kind = kindNamed(o.kind);
    const back = restoredToOf(o);
    const matched = (back !== null && invoices.has(back) ? kind.match(o, restoredBook(invoices.get(back)!, o.receivedAtomic)) : null) ?? kind.match(o, book);
    const inv = matched ? invoices.get(matched.id)! : null;
    // A kind that makes something once confirmed (a subscription) and matched nothing: counted,
    // whatever becomes of its row below.
    if (range.final && kind.confirmed && !inv) unmatchedOf.set(o.kind, (unmatchedOf.get(o.kind) ?? 0) + 1);
    // Dust nobody's invoice claims is no payment: no unmatched row, no event (a referenced or an
    // exactly matching one is recorded against its invoice like any other).
    if (!inv && o.receivedAtomic + o.feeReceivedAtomic < (floors.get(lower(o.tokenAddress)) ?? 1n)) {
      if (range.final) outcome.ignored.dust++;
      continue;
    }
    const accountId = inv?.row.account_id ?? owners.get(lower(o.to));
    // Neither an invoice's nor a merchant's: someone else's proxy payment.
    if (accountId === undefined) continue;
    const e = existingOf(o);
    kept.push({ txHash: o.txHash, txPosition: o.txPosition });

    let result: PaymentOutcome | null = null;
    let counted: bigint | null = null;
    if (range.final) {
      if (kind.confirmed && inv) {
        const list = confirmedMatches.get(o.kind) ?? [];
        // The invoice's status before this payment applies (a void checkout starts nothing).
        list.push({ payment: o, invoiceId: inv.row.id, accountId: inv.row.account_id, invoiceStatus: inv.status });
        confirmedMatches.set(o.kind, list);
      }
      if (!inv) {
        result = 'unmatched';
      } else {
        const before = remainingKey(inv);
        // A payment reorged out and back counts again, even toward the invoice it had paid (which stayed paid).
        const restored = e?.reorged_out_at != null && e.counted_atomic !== null && e.invoice_id === inv.row.id;
        const application = applyPaymentTo(
          { status: inv.status, amountAtomic: BigInt(inv.row.amount_atomic), paidAtomic: inv.paid, feeAtomic: inv.fee, feeCountedAtomic: inv.feeCounted },
          o,
          { blockTime: range.blockTimes.get(o.blockNumber) ?? new Date(), dustFloorAtomic: floors.get(lower(o.tokenAddress)) ?? 1n, restored },
        );
        result = application.outcome;
        if (application.outcome === 'applied') {
          counted = application.countedAtomic;
          inv.feeCounted = application.ledger.feeCountedAtomic;
          inv.paid = application.ledger.paidAtomic;
          inv.status = application.ledger.status;
          inv.changed = true;
          if (application.paidAt) inv.paidAt = application.paidAt.toISOString();
          // Dust toward an invoice counts, but announces nothing: no invoice.partially_paid (and no
          // acknowledgement email) for a payment anyone can repeat for the gas alone.
          if (application.announcesPartial) partial.push(inv.row.id);
          outcome.applied++;
          if (before !== null) byRemaining.get(before)!.delete(inv);
          indexAt(inv, remainingKey(inv));
        }
      }
    }
    const write: PaymentWrite = {
      id: e?.id ?? newId('pay'),
      account_id: accountId,
      environment: chain.environment,
      invoice_id: inv?.row.id ?? null,
      chain_id: chain.chainId,
      network: chain.network,
      tx_hash: o.txHash,
      log_index: o.logIndex,
      tx_position: o.txPosition,
      block_number: o.blockNumber.toString(),
      block_hash: o.blockHash,
      block_time: range.blockTimes.get(o.blockNumber)?.toISOString() ?? null,
      token_address: o.tokenAddress,
      from_address: o.from,
      to_address: o.to,
      amount_atomic: o.amountAtomic.toString(),
      fee_atomic: o.feeAtomic.toString(),
      fee_address: o.feeAddress,
      fee_expected_atomic: inv ? (kind.expectedFeeAtomic(o.receivedAtomic + o.feeReceivedAtomic, inv.row.fee_bps ?? 0)?.toString() ?? null) : null,
      received_atomic: o.receivedAtomic.toString(),
      fee_received_atomic: o.feeReceivedAtomic.toString(),
      counted_atomic: counted === null ? null : counted.toString(),
      payment_reference: inv?.row.payment_reference ?? null,
      kind: o.kind,
      status: range.final ? 'confirmed' : 'pending',
      outcome: result,
      created_at: e?.created_at.toISOString() ?? now,
      confirmed_at: range.final ? now : null,
      observed_digest: observedDigest(o),
    };
    (e ? updates : inserts).push(write);
  }

  // The new rows are sent first; their events are presented while Postgres inserts them (a
  // range of 10,000 payments: about 200 ms of JavaScript that no longer waits for the insert).
  // One query at a time on the client: should presenting throw, the insert is awaited before the
  // rollback is sent.
  const inserting = insertPayments(tx, inserts);
  const written = [...inserts, ...updates];
  let events: Parameters<typeof emitPaymentEvents>[1];
  try {
    events = written.map((w) => ({
      accountId: w.account_id,
      environment: w.environment,
      type: w.status === 'confirmed' ? 'payment.confirmed' : 'payment.pending',
      id: w.id,
      object: presentPayment(asRow(w), [chain], range.head),
    }));
  } catch (err) {
    await inserting.catch(() => undefined);
    throw err;
  }
  const inserted = await inserting;
  const updated = await updatePayments(tx, updates);
  // Under the cursor's lock nobody else writes this chain's rows: a shortfall is a bug, and
  // rolling back keeps the invoices from counting a payment whose row is not this run's.
  if (inserted.size !== inserts.length || updated.size !== updates.length) {
    throw new Error(`payment rows changed under the chain cursor's lock (chain ${chain.chainId})`);
  }
  await emitPaymentEvents(tx, events);
  // What matched payments make once confirmed (a subscription), before the balances: a trigger of
  // the invoice turning paid finds it.
  for (const [name, matched] of confirmedMatches) await kindNamed(name).confirmed!(tx, chain, matched);
  for (const [name, count] of unmatchedOf) outcome.ignoredLogs.push({ kind: name, reason: 'unmatched', count });
  const balances: InvoiceBalanceWrite[] = [...invoices.values()]
    .filter((s) => s.changed)
    .map((s) => ({ id: s.row.id, amount_paid_atomic: s.paid.toString(), fee_counted_atomic: s.feeCounted.toString(), status: s.status, paid_at: s.paidAt }));
  await writeInvoiceBalances(tx, balances);
  // invoice.partially_paid for what stays open (one paid in full by a later log of the range has invoice.paid).
  await emitPartiallyPaid(tx, partial.filter((id) => invoices.get(id)?.status !== 'paid'));
  for (const w of written) outcome.recorded.push({ kind: w.kind, status: w.status });
  return { outcome, kept };
}

/** The confirmed logs that are no payments (a subscription canceled), by kind. */
async function recordRecords(tx: PoolClient, chain: Chain, records: readonly ObservedRecord[], blockTimes: ReadonlyMap<bigint, Date>, outcome: RangeOutcome): Promise<void> {
  const byKind = new Map<string, ObservedRecord[]>();
  for (const r of records) byKind.set(r.kind, [...(byKind.get(r.kind) ?? []), r]);
  for (const [name, list] of byKind) {
    const done = await kindNamed(name).record!(tx, chain, list, blockTimes);
    if (done.ignored > 0) outcome.ignoredLogs.push({ kind: name, reason: 'unknown_subscription', count: done.ignored });
  }
}

function checkoutTerms(c: CheckoutTermsRow): CheckoutTerms {
  return {
    id: c.id,
    checkoutReference: c.checkout_reference,
    contractAddress: c.contract_address,
    payee: c.payee_address,
    token: c.token_address,
    amountAtomic: BigInt(c.amount_atomic),
    periodSeconds: c.period_seconds,
    feeBps: c.fee_bps,
    feeAddress: c.fee_address,
    operator: c.operator_address,
    endsAt: c.ends_at === null ? null : new Date(c.ends_at),
    subscriptionId: c.subscription_id,
    subscriptionOnchainId: c.subscription_onchain_id,
  };
}

function asRow(w: PaymentWrite): PaymentRow {
  return {
    ...w,
    block_time: w.block_time ? new Date(w.block_time) : null,
    created_at: new Date(w.created_at),
    confirmed_at: w.confirmed_at ? new Date(w.confirmed_at) : null,
    removed_at: null,
    reorged_out_at: null,
    head_block: null,
  };
}

/** Moves the cursor back (a reorg under it, or a chain restarted behind it). Null when another worker moved it first. */
export async function rewindCursor(
  pool: Pool,
  chain: Chain,
  expected: bigint,
  to: { block: bigint; hash: string | null; checkpoints: [string, string][] },
  /** A chain started over: its head now; pending payments above it are gone, and the head seen before is forgotten. */
  restartedAt?: bigint,
): Promise<true | null> {
  return withTransaction(pool, async (tx) => {
    const cursor = await lockCursor(tx, chain.chainId, BigInt(chain.startBlock) - 1n);
    if (BigInt(cursor.block_number) !== expected) return null;
    await moveCursor(tx, chain.chainId, { ...to, time: null });
    // A reorg: what the cursor covered is rescanned, and a confirmed payment gone from it is reported.
    // A local chain started over is another chain: its old payments are left as they were.
    if (restartedAt === undefined) await markRescan(tx, chain.chainId, expected);
    if (restartedAt !== undefined) {
      const gone = await removeVanishedPayments(tx, chain.chainId, restartedAt + 1n, null, []);
      await emitPaymentEvents(
        tx,
        gone.map((p) => ({ accountId: p.account_id, environment: p.environment, type: 'payment.removed', id: p.id, object: presentPayment(p, [chain], restartedAt) })),
      );
      await resetHead(tx, chain.chainId);
    }
    return true;
  });
}
