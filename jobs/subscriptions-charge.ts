// `subscriptions.charge`: on its own job scheduler (every SUBSCRIPTION_POLL_INTERVAL_MS). Claims
// the running subscriptions whose next_work_at has come, or whose period falls due before the next
// run (its invoice made ahead, charged as it falls due) (Postgres is the truth: FOR UPDATE SKIP
// LOCKED, then a lease, so two workers never look at one subscription at once and a crashed one's
// rows come back when its lease ends) and, for each, bills its current period (docs/subscriptions.md):
//
// - ends_at passed: ended.
// - period k's invoice (made and issued now if missing: src/invoicing/subscription-period.ts);
// - payments of it seen and not yet confirmed that would settle it (the customer paying it by
//   wallet): not charged (the contract pulls the whole amount: the period would be paid twice),
//   looked at again soon;
// - the charge simulated through the relayer; would succeed: sent, then looked at again later
//   (the watcher's Charged log pays the invoice and the advance trigger moves the subscription to
//   the next period, which takes the lease away; still unpaid then: simulated again, and a charge
//   the chain already holds is not sent twice: the contract answers period_already_charged);
// - would fail for the customer's reason: a failed attempt (attempt_count + 1, failure code and
//   words, next_attempt_at from DUNNING_SCHEDULE, invoice.payment_failed, one email), the
//   subscription past_due; after the last attempt canceled by dunning (the on-chain cancel follows,
//   jobs/subscriptions-cancel.ts) or kept past_due with the next period billed
//   (DUNNING_FINAL_ACTION);
// - the relayer's own faults (RPC down, no gas: it throws) are retried soon, never counted.
//
// Charges falling due together are billed in batches, each stage once for the batch (a burst of
// them is the common case: subscribers who signed up together fall due together): the batch's
// period invoices made in one transaction, its pending payments read in one query, its
// simulations a few at a time, its sends queued at once (the relayer signs and records a round
// together), the sent ones recorded and their leases moved in one statement each. A few batches
// are worked at once, so one's invoices are made while another's charges are being sent.
import { setTimeout as sleep } from 'node:timers/promises';
import pMap from 'p-map';
import { newId } from '../src/domain/ids.js';
import { recordChargesSent, recordFailedAttempt, type InvoiceRow } from '../src/db/invoices.js';
import { upsertDelivery } from '../src/db/deliveries.js';
import { pendingPaymentsAtomicOf } from '../src/db/payments.js';
import { withTransaction } from '../src/db/pool.js';
import {
  claimChargeWork,
  confirmChargesToSend,
  markSubscriptionEnded,
  recordSubscriptionAttemptFailed,
  releaseWork,
  releaseWorks,
  skipPeriod,
  type SubscriptionWork,
} from '../src/db/subscriptions.js';
import { failureMessage, isFailureCode, nextAttemptAt, periodChargeVerdict, periodIndexAt, type FailureCode } from '../src/domain/subscriptions.js';
import { ensurePeriodInvoices } from '../src/invoicing/subscription-period.js';
import { messageIdFor } from '../src/mail/message-id.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { ChargeTarget, JobContext, SubscriptionRelayer } from '../src/queue/job-context.js';
import { enqueueInTransaction } from '../src/queue/outbox.js';
import type { Logger } from '../src/log.js';

/** Subscriptions claimed per statement and billed as one batch; batches worked at once; simulations in flight at once per batch. */
const BATCH = 100;
const BATCH_LANES = 3;
const SIMULATIONS_IN_FLIGHT = 64;
/** How long a claim holds a subscription: a worker that dies mid-way frees it this much later. */
const LEASE_MS = 120_000;
/** A sent charge not paid this much later is looked at again (simulated: landed, lost, or now failing). */
const CHECK_SENT_AFTER_MS = 60_000;
/** A relayer fault (RPC down, no gas, no key) is retried this much later, not counted. */
const RETRY_FAULT_MS = 10_000;
/** The chain's clock is behind ours (period_not_begun): looked at again this much later. */
const RETRY_NOT_BEGUN_MS = 2_000;
/** A payment of the period invoice is on its way (not yet confirmed): looked at again this much later. */
const RECHECK_PENDING_PAYMENT_MS = 10_000;
/** How far ahead a run claims a period falling due at most (a batch sleeps until then, well within its lease). */
const CLAIM_AHEAD_MAX_MS = 5_000;
/** A run stops claiming after this long; the next tick carries on. */
const RUN_BUDGET_MS = 30_000;

type Outcome = 'payment_pending' | 'sent' | 'awaiting_confirmation' | 'failed_attempt' | 'ended' | 'period_skipped' | 'retry_later' | 'relayer_fault' | 'no_operator' | 'lease_lost';
type Count = (outcome: Outcome) => void;
type Ctx = JobContext & { log: Logger };

export const subscriptionsCharge: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const relayer = ctx.relayer;
  if (!relayer) return 'no relayer in this process';
  const tally = new Map<Outcome, number>();
  const count: Count = (outcome) => {
    tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
    ctx.countSubscriptionWork?.('subscriptions.charge', outcome);
  };
  const deadline = Date.now() + RUN_BUDGET_MS;
  let drained = false;
  const lane = async () => {
    while (!drained && Date.now() < deadline) {
      // One run ahead: a period falling due before the next run is claimed now, its invoice made,
      // and charged as it falls due (not up to a poll interval later).
      const claimed = await claimChargeWork(ctx.pool, BATCH, LEASE_MS, Math.min(ctx.config.subscriptions.pollIntervalMs, CLAIM_AHEAD_MAX_MS));
      if (claimed.length < BATCH) drained = true;
      if (claimed.length > 0) await chargeBatch(claimed, ctx, relayer, count);
    }
  };
  await Promise.all(Array.from({ length: BATCH_LANES }, lane));
  if (tally.size === 0) return 'nothing due';
  const summary = Object.fromEntries(tally);
  ctx.log.info(summary, 'subscriptions looked at');
  return [...tally].map(([k, v]) => `${k} ${v}`).join(', ');
};

/** A charge that would succeed, to be sent with the rest of its batch. */
interface Chargeable {
  sub: SubscriptionWork;
  invoice: InvoiceRow;
  target: ChargeTarget & { gas?: bigint };
  firstAttempt: boolean;
}

/**
 * One claimed batch, stage by stage. A database error or a bug in a stage shared by the batch is
 * logged with its stack and each of its subscriptions is retried when its lease ends; in a
 * subscription's own step, only that one is.
 */
async function chargeBatch(subs: readonly SubscriptionWork[], ctx: Ctx, relayer: SubscriptionRelayer, count: Count): Promise<void> {
  const own = async (sub: SubscriptionWork, step: () => Promise<Outcome | Chargeable>): Promise<Chargeable | null> => {
    try {
      const result = await step();
      if (typeof result !== 'string') return result;
      count(result);
    } catch (err) {
      ctx.log.error({ err, subscription_id: sub.id }, 'subscription charge failed; retried when its lease ends');
      count('retry_later');
    }
    return null;
  };
  const billable: SubscriptionWork[] = [];
  for (const sub of subs) {
    try {
      const outcome = await triage(sub, ctx, relayer);
      if (outcome === 'billable') billable.push(sub);
      else count(outcome);
    } catch (err) {
      ctx.log.error({ err, subscription_id: sub.id }, 'subscription charge failed; retried when its lease ends');
      count('retry_later');
    }
  }
  if (billable.length === 0) return;
  let chargeable: Chargeable[];
  try {
    const periods = billable.map((sub) => ({ sub, k: Math.max(1, periodIndexAt({ startedAt: sub.started_at, intervalSeconds: sub.interval_seconds }, sub.next_charge_at)) }));
    const { invoices, failed } = await ensurePeriodInvoices(ctx.pool, periods);
    const pending = await pendingPaymentsAtomicOf(ctx.pool, [...invoices.values()].map((i) => i.id));
    const found: Chargeable[] = [];
    for (const { sub, k } of periods) {
      const invoice = invoices.get(sub.id);
      const c = await own(sub, async () => {
        if (!invoice) throw failed.get(sub.id) ?? new Error(`period ${k} invoice of subscription ${sub.id} was not made`);
        return bill(sub, k, invoice, pending.get(invoice.id) ?? 0n, ctx);
      });
      if (c) found.push(c);
    }
    chargeable = found;
  } catch (err) {
    ctx.log.error({ err, subscriptions: billable.length }, 'subscription charges of a batch failed; retried when their leases end');
    for (let i = 0; i < billable.length; i++) count('retry_later');
    return;
  }
  // Claimed ahead of their due time: charged once it has come (the relayer's simulation then waits
  // for the chain's block that says so).
  const dueIn = Math.max(0, ...chargeable.map((c) => c.sub.next_charge_at.getTime())) - Date.now();
  if (dueIn > 0) await sleep(dueIn);
  // Simulated at once (a few in flight), then every charge that would succeed queued at once: the
  // relayer takes them in rounds under one hold of the chain's sequence lock.
  const toSend: Chargeable[] = [];
  await pMap(
    chargeable,
    async (c) => {
      const next = await own(c.sub, () => simulate(c, ctx, relayer));
      if (next) toSend.push(next);
    },
    { concurrency: SIMULATIONS_IN_FLIGHT },
  );
  // The merchant may have canceled the subscription or voided the period's invoice over the API
  // while this batch slept until the due time and simulated (seconds): looked at again, in one
  // statement, just before anything is signed (found by an attack: the customer was charged after
  // the API had answered canceled).
  let confirmed: Map<string, Date>;
  try {
    confirmed = await confirmChargesToSend(
      ctx.pool,
      toSend.map((c) => ({ id: c.sub.id, lease: c.sub.lease, invoiceId: c.invoice.id, until: after(LEASE_MS) })),
    );
  } catch (err) {
    ctx.log.error({ err, charges: toSend.length }, 'charges of a batch could not be confirmed; retried when their leases end');
    for (let i = 0; i < toSend.length; i++) count('retry_later');
    return;
  }
  const going: Chargeable[] = [];
  for (const c of toSend) {
    const lease = confirmed.get(c.sub.id);
    if (lease === undefined) count('lease_lost');
    else going.push({ ...c, sub: { ...c.sub, lease } });
  }
  const sent: { c: Chargeable; txHash: string; nonce: number }[] = [];
  await Promise.all(
    going.map((c) =>
      own(c.sub, async () => {
        try {
          const tx = await relayer.sendCharge(c.sub.chain_id, c.target);
          sent.push({ c, ...tx });
          return 'sent';
        } catch (err) {
          ctx.log.warn({ err, subscription_id: c.sub.id, invoice_id: c.invoice.id }, 'relayer could not send the charge; retried, not counted');
          await releaseWork(ctx.pool, c.sub.id, c.sub.lease, after(RETRY_FAULT_MS));
          return 'relayer_fault';
        }
      }).then(() => undefined),
    ),
  );
  if (sent.length === 0) return;
  try {
    await recordChargesSent(
      ctx.pool,
      sent.map(({ c, txHash }) => ({ invoiceId: c.invoice.id, txHash })),
    );
    await releaseWorks(
      ctx.pool,
      sent.map(({ c }) => ({ id: c.sub.id, lease: c.sub.lease, at: after(CHECK_SENT_AFTER_MS) })),
    );
  } catch (err) {
    // On the chain already: the watcher pays the invoices; the leases bring them back to be looked at.
    ctx.log.error({ err, charges: sent.length }, 'sent charges could not be recorded; looked at again when their leases end');
  }
  for (const { c, txHash, nonce } of sent) {
    if (c.firstAttempt) ctx.observeChargeLateness?.((Date.now() - c.sub.next_charge_at.getTime()) / 1000);
    ctx.log.info({ subscription_id: c.sub.id, invoice_id: c.invoice.id, period_index: c.target.periodIndex, tx_hash: txHash, nonce }, 'charge sent');
  }
}

const after = (ms: number) => new Date(Date.now() + ms);

/** Before its period is billed: ended (ends_at passed), or not ours to charge (no key, another operator). */
async function triage(sub: SubscriptionWork, ctx: Ctx, relayer: SubscriptionRelayer): Promise<Outcome | 'billable'> {
  if (sub.ends_at !== null && sub.ends_at.getTime() <= Date.now()) {
    return (await markSubscriptionEnded(ctx.pool, sub.id, sub.lease)) ? 'ended' : 'lease_lost';
  }
  const operator = relayer.operatorAddress(sub.chain_id);
  if (operator === null || (sub.operator_address !== null && sub.operator_address.toLowerCase() !== operator.toLowerCase())) {
    // No key here, or the subscription names another operator (a key that was replaced): only
    // that operator can charge it; the warning repeats every lease until an operator acts.
    ctx.log.warn(
      { subscription_id: sub.id, chain_id: sub.chain_id, operator: sub.operator_address, relayer: operator },
      'this relayer cannot charge the subscription (no key for its chain, or another operator)',
    );
    await releaseWork(ctx.pool, sub.id, sub.lease, after(LEASE_MS));
    return 'no_operator';
  }
  return 'billable';
}

/** Period k's invoice as it stands: settled or awaiting a payment (nothing to charge), or a charge to simulate. */
async function bill(sub: SubscriptionWork, k: number, invoice: InvoiceRow, pendingAtomic: bigint, ctx: Ctx): Promise<Outcome | Chargeable> {
  const period = periodChargeVerdict({
    status: invoice.status,
    amountAtomic: BigInt(invoice.amount_atomic ?? sub.amount_atomic),
    paidAtomic: BigInt(invoice.amount_paid_atomic),
    pendingAtomic,
  });
  if (period === 'payment_pending') {
    // Not charged, not counted: looked at again once the payment had time to confirm (it pays
    // the invoice and the advance trigger moves the subscription on) or to vanish.
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RECHECK_PENDING_PAYMENT_MS));
    return 'payment_pending';
  }
  if (period === 'settled') {
    // Paid already (its trigger advanced the subscription unless it was paid before it was
    // linked) or voided by the merchant (the period is not billed): on to the next period.
    const end = invoice.period_end!;
    const ok = await skipPeriod(ctx.pool, sub.id, sub.lease, end, sub.ends_at !== null && sub.ends_at < end ? sub.ends_at : end);
    return ok ? 'period_skipped' : 'lease_lost';
  }
  if (invoice.payment_reference === null) throw new Error(`period invoice ${invoice.id} has no payment reference`);
  return {
    sub,
    invoice,
    target: {
      contract: sub.contract_address as `0x${string}`,
      onchainId: BigInt(sub.onchain_id),
      periodIndex: k,
      paymentReference: invoice.payment_reference as `0x${string}`,
    },
    firstAttempt: invoice.attempt_count === 0 && invoice.charge_sent_at === null && invoice.failure_code === null,
  };
}

/** The charge simulated: would succeed (to be sent, with the gas the simulation measured), or what it means when it would not. */
async function simulate(c: Chargeable, ctx: Ctx, relayer: SubscriptionRelayer): Promise<Outcome | Chargeable> {
  const { sub, invoice } = c;
  let verdict: Awaited<ReturnType<SubscriptionRelayer['simulateCharge']>>;
  try {
    verdict = await relayer.simulateCharge(sub.chain_id, c.target);
  } catch (err) {
    ctx.log.warn({ err, subscription_id: sub.id, invoice_id: invoice.id }, 'relayer could not simulate the charge; retried, not counted');
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_FAULT_MS));
    return 'relayer_fault';
  }
  if (verdict.ok) return { ...c, target: { ...c.target, ...(verdict.gas === undefined ? {} : { gas: verdict.gas }) } };
  if (verdict.code === 'period_already_charged') {
    // On-chain already (this worker's earlier send, or one before a crash): the watcher pays the invoice.
    await releaseWork(ctx.pool, sub.id, sub.lease, after(CHECK_SENT_AFTER_MS));
    return 'awaiting_confirmation';
  }
  if (verdict.code === 'period_not_begun' || !isFailureCode(verdict.code)) {
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_NOT_BEGUN_MS));
    return 'retry_later';
  }
  if (c.firstAttempt) ctx.observeChargeLateness?.((Date.now() - sub.next_charge_at.getTime()) / 1000);
  const recorded = await recordAttemptFailed(ctx, sub, invoice, verdict.code, verdict.shortAtomic);
  if (recorded) ctx.log.info({ subscription_id: sub.id, invoice_id: invoice.id, period_index: c.target.periodIndex, failure_code: verdict.code }, 'charge attempt failed');
  return recorded ? 'failed_attempt' : 'lease_lost';
}

class LeaseLost extends Error {}

/** One failed attempt, in one transaction: the invoice's count and words, its event and email, the subscription's next step. */
async function recordAttemptFailed(
  ctx: JobContext,
  sub: SubscriptionWork,
  invoice: InvoiceRow,
  code: FailureCode,
  shortAtomic: bigint | undefined,
): Promise<boolean> {
  const now = new Date();
  const attempt = invoice.attempt_count + 1;
  const dueAt = invoice.period_start ?? sub.next_charge_at;
  // The chain says the subscription ended (its clock against ours): no further attempt.
  const next = code === 'subscription_ended' ? null : nextAttemptAt(dueAt, ctx.config.subscriptions.dunningSchedule, attempt, now);
  const finalAction = next !== null || code === 'subscription_ended' ? null : ctx.config.subscriptions.dunningFinalAction;
  const message = failureMessage({
    code,
    ...(shortAtomic === undefined ? {} : { shortAtomic }),
    amountAtomic: BigInt(sub.amount_atomic),
    decimals: invoice.token_decimals,
    currency: invoice.currency,
  });
  try {
    await withTransaction(ctx.pool, async (tx) => {
      const updated = await recordFailedAttempt(tx, invoice.id, { code, message, nextAttemptAt: next });
      if (!updated) throw new LeaseLost('the invoice is no longer open');
      const end = invoice.period_end!;
      const moved =
        code === 'subscription_ended'
          ? await markSubscriptionEnded(tx, sub.id, sub.lease)
          : await recordSubscriptionAttemptFailed(
              tx,
              sub.id,
              sub.lease,
              next !== null
                ? { kind: 'retry', nextWorkAt: next }
                : finalAction === 'cancel'
                  ? { kind: 'cancel' }
                  : { kind: 'keep', nextChargeAt: end, nextWorkAt: sub.ends_at !== null && sub.ends_at < end ? sub.ends_at : end },
            );
      if (!moved) throw new LeaseLost('the subscription moved on');
      const deliveryId = newId('dlv');
      await upsertDelivery(tx, { id: deliveryId, invoiceId: invoice.id, kind: 'payment_failed', slotAt: now, messageId: messageIdFor(deliveryId, ctx.config.mailFrom) });
      await enqueueInTransaction(tx, 'invoice.payment_failed', {
        invoiceId: invoice.id,
        deliveryId,
        attempt: updated.attempt_count,
        failureCode: code,
        failureMessage: message,
        nextAttemptAt: next === null ? null : next.toISOString(),
        finalAction,
      });
    });
    return true;
  } catch (err) {
    // Paid or advanced meanwhile (a payment won the race): nothing counted, nothing to do.
    if (err instanceof LeaseLost) return false;
    throw err;
  }
}
