// Records what a scanned range of a chain holds, in ONE transaction with the cursor: the payment
// rows, what confirmed ones do to their invoices (the status change fires invoice.paid, the
// receipt and the reminders' stop), and every event. The cursor row's lock serialises writers of
// a chain, and (chain_id, tx_hash, log_index) is unique: a repeated run, a run killed half-way or
// two workers at once never make a second row or a second event.
import { compareScannedFor, type Chain, type ScannedFor } from '../domain/chains.js';
import { newId } from '../domain/ids.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import {
  applyPayment,
  countedAtomic,
  expectedFeeAtomic,
  matchTransfer,
  remainingAtomic,
  sameAddress,
  type PaymentOutcome,
} from '../domain/payments.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import {
  emitPartiallyPaid,
  emitPaymentEvents,
  insertPayments,
  lockCursor,
  lockExistingPayments,
  lockPayableInvoices,
  moveCursor,
  ownersOfAddresses,
  recordHead,
  resetHead,
  removeVanishedPayments,
  updatePayments,
  writeInvoiceBalances,
  type InvoiceBalanceWrite,
  type PayableInvoiceRow,
  type PaymentRow,
  type PaymentWrite,
} from '../db/payments.js';
import type { ObservedPayment } from './observe.js';
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
  /** Pending payments not observed whose block is still on the chain (by hash): kept, never announced removed. */
  stillOnChain?: { txHash: string; logIndex: number }[];
}

export interface RangeOutcome {
  recorded: { kind: ObservedPayment['kind']; status: 'pending' | 'confirmed' | 'removed' }[];
  applied: number;
}

interface InvoiceState {
  row: PayableInvoiceRow;
  status: InvoiceStatus;
  paid: bigint;
  paidAt: string | null;
  changed: boolean;
}

const lower = (a: string) => a.toLowerCase();
const key = (txHash: string, logIndex: number) => `${txHash}:${logIndex}`;
const transferKey = (to: string, token: string, remaining: bigint) => `${lower(to)}|${lower(token)}|${remaining}`;

/** Null when another worker moved the cursor meanwhile (nothing written: its run covers the range). */
export async function recordRange(pool: Pool, chain: Chain, range: RangeToRecord): Promise<RangeOutcome | null> {
  return withTransaction(pool, async (tx) => {
    const cursor = await lockCursor(tx, chain.chainId, BigInt(chain.startBlock) - 1n);
    if (BigInt(cursor.block_number) !== range.expectedCursor) return null;
    if (range.scannedFor && cursor.scanned_for && compareScannedFor(cursor.scanned_for, range.scannedFor) !== 'same') return null;
    // A run that read an older head than one already recorded (two workers, overlapping runs)
    // must not turn the newer run's pending payments into removed ones.
    if (!range.final && cursor.head_block !== null && BigInt(cursor.head_block) > range.head) return { recorded: [], applied: 0 };
    const outcome = await recordPayments(tx, chain, range);
    const removed = await removeVanishedPayments(
      tx,
      chain.chainId,
      range.from,
      range.to,
      [...range.observed.map((o) => ({ txHash: o.txHash, logIndex: o.logIndex })), ...(range.stillOnChain ?? [])],
    );
    await emitPaymentEvents(
      tx,
      removed.map((p) => ({ accountId: p.account_id, environment: p.environment, type: 'payment.removed', id: p.id, object: presentPayment(p, range.head) })),
    );
    for (const p of removed) outcome.recorded.push({ kind: p.kind, status: 'removed' });
    if (range.cursorTo) await moveCursor(tx, chain.chainId, range.cursorTo);
    await recordHead(tx, chain.chainId, range.head, range.safe);
    return outcome;
  });
}

async function recordPayments(tx: PoolClient, chain: Chain, range: RangeToRecord): Promise<RangeOutcome> {
  const outcome: RangeOutcome = { recorded: [], applied: 0 };
  if (range.observed.length === 0) return outcome;
  const existing = new Map(
    (await lockExistingPayments(tx, chain.chainId, range.observed.map((o) => ({ txHash: o.txHash, logIndex: o.logIndex })))).map((e) => [key(e.tx_hash, e.log_index), e]),
  );
  // A confirmed row is final; a pending one seen again in the same block needs nothing until it confirms.
  const todo = range.observed.filter((o) => {
    const e = existing.get(key(o.txHash, o.logIndex));
    return !e || (e.status !== 'confirmed' && (range.final || e.status === 'removed' || e.block_hash !== o.blockHash));
  });
  if (todo.length === 0) return outcome;

  const topics = [...new Set(todo.flatMap((o) => (o.referenceTopic ? [o.referenceTopic] : [])))];
  const targets = [...new Set(todo.filter((o) => o.kind === 'transfer').map((o) => lower(o.to)))];
  const invoices = new Map<string, InvoiceState>(
    (await lockPayableInvoices(tx, chain.chainId, topics, targets)).map((row) => [
      row.id,
      { row, status: row.status, paid: BigInt(row.amount_paid_atomic), paidAt: null, changed: false },
    ]),
  );
  const byTopic = new Map([...invoices.values()].filter((s) => s.row.payment_reference_topic).map((s) => [s.row.payment_reference_topic!, s]));
  // A plain transfer's candidates by (address, token, remaining), kept current as payments apply:
  // scanning every invoice of the address for each transfer is quadratic in a busy range.
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
  const owners = await ownersOfAddresses(tx, chain.chainId, chain.environment, [...new Set(todo.map((o) => lower(o.to)))]);

  const inserts: PaymentWrite[] = [];
  const updates: PaymentWrite[] = [];
  const partial: string[] = [];
  const now = new Date().toISOString();
  for (const o of todo) {
    const counted = countedAtomic(o);
    let inv: InvoiceState | null = null;
    if (o.kind === 'proxy') {
      const s = o.referenceTopic ? byTopic.get(o.referenceTopic) : undefined;
      if (s && sameAddress(s.row.settlement_address, o.to) && sameAddress(s.row.token_address, o.tokenAddress)) inv = s;
    } else {
      const candidates = [...(byRemaining.get(transferKey(o.to, o.tokenAddress, counted)) ?? [])].map((s) => ({ s, remainingAtomic: counted }));
      inv = matchTransfer(candidates, counted)?.s ?? null;
    }
    const accountId = inv?.row.account_id ?? owners.get(lower(o.to));
    // Neither an invoice's nor a merchant's: someone else's proxy payment.
    if (accountId === undefined) continue;

    let result: PaymentOutcome | null = null;
    if (range.final) {
      if (!inv) {
        result = 'unmatched';
      } else {
        const before = remainingKey(inv);
        const application = applyPayment({ status: inv.status, amountAtomic: BigInt(inv.row.amount_atomic), paidAtomic: inv.paid }, counted);
        result = application.outcome;
        if (application.outcome === 'applied') {
          inv.paid = application.paidAtomic;
          inv.changed = true;
          if (application.fullyPaid) {
            inv.status = 'paid';
            inv.paidAt = (range.blockTimes.get(o.blockNumber) ?? new Date()).toISOString();
          } else {
            partial.push(inv.row.id);
          }
          outcome.applied++;
          if (before !== null) byRemaining.get(before)!.delete(inv);
          indexAt(inv, remainingKey(inv));
        }
      }
    }
    const e = existing.get(key(o.txHash, o.logIndex));
    const write: PaymentWrite = {
      id: e?.id ?? newId('pay'),
      account_id: accountId,
      environment: chain.environment,
      invoice_id: inv?.row.id ?? null,
      chain_id: chain.chainId,
      network: chain.network,
      tx_hash: o.txHash,
      log_index: o.logIndex,
      block_number: o.blockNumber.toString(),
      block_hash: o.blockHash,
      block_time: range.blockTimes.get(o.blockNumber)?.toISOString() ?? null,
      token_address: o.tokenAddress,
      from_address: o.from,
      to_address: o.to,
      amount_atomic: o.amountAtomic.toString(),
      fee_atomic: o.feeAtomic.toString(),
      fee_address: o.feeAddress,
      fee_expected_atomic: o.kind === 'proxy' && inv ? expectedFeeAtomic('proxy', counted, inv.row.fee_bps ?? 0).toString() : null,
      payment_reference: inv?.row.payment_reference ?? null,
      kind: o.kind,
      status: range.final ? 'confirmed' : 'pending',
      outcome: result,
      created_at: e?.created_at.toISOString() ?? now,
      confirmed_at: range.final ? now : null,
    };
    (e ? updates : inserts).push(write);
  }

  const inserted = await insertPayments(tx, inserts);
  const updated = await updatePayments(tx, updates);
  // Under the cursor's lock nobody else writes this chain's rows: a shortfall is a bug, and
  // rolling back keeps the invoices from counting a payment whose row is not this run's.
  if (inserted.size !== inserts.length || updated.size !== updates.length) {
    throw new Error(`payment rows changed under the chain cursor's lock (chain ${chain.chainId})`);
  }
  const written = [...inserts, ...updates];
  await emitPaymentEvents(
    tx,
    written.map((w) => ({
      accountId: w.account_id,
      environment: w.environment,
      type: w.status === 'confirmed' ? 'payment.confirmed' : 'payment.pending',
      id: w.id,
      object: presentPayment(asRow(w), range.head),
    })),
  );
  const balances: InvoiceBalanceWrite[] = [...invoices.values()]
    .filter((s) => s.changed)
    .map((s) => ({ id: s.row.id, amount_paid_atomic: s.paid.toString(), status: s.status, paid_at: s.paidAt }));
  await writeInvoiceBalances(tx, balances);
  // invoice.partially_paid for what stays open (one paid in full by a later log of the range has invoice.paid).
  await emitPartiallyPaid(tx, partial.filter((id) => invoices.get(id)?.status !== 'paid'));
  for (const w of written) outcome.recorded.push({ kind: w.kind, status: w.status });
  return outcome;
}

function asRow(w: PaymentWrite): PaymentRow {
  return {
    ...w,
    block_time: w.block_time ? new Date(w.block_time) : null,
    created_at: new Date(w.created_at),
    confirmed_at: w.confirmed_at ? new Date(w.confirmed_at) : null,
    removed_at: null,
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
    if (restartedAt !== undefined) {
      const gone = await removeVanishedPayments(tx, chain.chainId, restartedAt + 1n, null, []);
      await emitPaymentEvents(
        tx,
        gone.map((p) => ({ accountId: p.account_id, environment: p.environment, type: 'payment.removed', id: p.id, object: presentPayment(p, restartedAt) })),
      );
      await resetHead(tx, chain.chainId);
    }
    return true;
  });
}
