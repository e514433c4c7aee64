// `subscriptions.charge`: on its own job scheduler (every SUBSCRIPTION_POLL_INTERVAL_MS). Claims
// the running subscriptions whose next_work_at has come (Postgres is the truth: FOR UPDATE SKIP
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
import { newId } from '../src/domain/ids.js';
import { recordChargeSent, recordFailedAttempt, type InvoiceRow } from '../src/db/invoices.js';
import { upsertDelivery } from '../src/db/deliveries.js';
import { pendingPaymentsAtomic } from '../src/db/payments.js';
import { withTransaction } from '../src/db/pool.js';
import {
  claimChargeWork,
  markSubscriptionEnded,
  recordSubscriptionAttemptFailed,
  releaseWork,
  skipPeriod,
  type SubscriptionWork,
} from '../src/db/subscriptions.js';
import { failureMessage, isFailureCode, nextAttemptAt, periodChargeVerdict, periodIndexAt, type FailureCode } from '../src/domain/subscriptions.js';
import { ensurePeriodInvoice } from '../src/invoicing/subscription-period.js';
import { messageIdFor } from '../src/mail/message-id.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { ChargeTarget, JobContext, SubscriptionRelayer } from '../src/queue/job-context.js';
import { enqueueInTransaction } from '../src/queue/outbox.js';
import type { Logger } from '../src/log.js';

/** Subscriptions claimed per statement, and looked at in parallel (the relayer serialises the sends of a chain itself). */
const BATCH = 100;
const PARALLEL = 16;
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
/** A run stops claiming after this long; the next tick carries on. */
const RUN_BUDGET_MS = 30_000;

type Outcome = 'payment_pending' | 'sent' | 'awaiting_confirmation' | 'failed_attempt' | 'ended' | 'period_skipped' | 'retry_later' | 'relayer_fault' | 'no_operator' | 'lease_lost';

export const subscriptionsCharge: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const relayer = ctx.relayer;
  if (!relayer) return 'no relayer in this process';
  const tally = new Map<Outcome, number>();
  const deadline = Date.now() + RUN_BUDGET_MS;
  while (Date.now() < deadline) {
    const claimed = await claimChargeWork(ctx.pool, BATCH, LEASE_MS);
    await inParallel(claimed, PARALLEL, async (sub) => {
      let outcome: Outcome;
      try {
        outcome = await chargeOne(sub, ctx, relayer);
      } catch (err) {
        // A database error or a bug: logged with its stack; the lease makes it due again.
        ctx.log.error({ err, subscription_id: sub.id }, 'subscription charge failed; retried when its lease ends');
        outcome = 'retry_later';
      }
      tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
      ctx.countSubscriptionWork?.('subscriptions.charge', outcome);
    });
    if (claimed.length < BATCH) break;
  }
  if (tally.size === 0) return 'nothing due';
  const summary = Object.fromEntries(tally);
  ctx.log.info(summary, 'subscriptions looked at');
  return [...tally].map(([k, v]) => `${k} ${v}`).join(', ');
};

async function chargeOne(sub: SubscriptionWork, ctx: JobContext & { log: Logger }, relayer: SubscriptionRelayer): Promise<Outcome> {
  const log = ctx.log.child({ subscription_id: sub.id });
  const after = (ms: number) => new Date(Date.now() + ms);
  if (sub.ends_at !== null && sub.ends_at.getTime() <= Date.now()) {
    return (await markSubscriptionEnded(ctx.pool, sub.id, sub.lease)) ? 'ended' : 'lease_lost';
  }
  const operator = relayer.operatorAddress(sub.chain_id);
  if (operator === null || (sub.operator_address !== null && sub.operator_address.toLowerCase() !== operator.toLowerCase())) {
    // No key here, or the subscription names another operator (a key that was replaced): only
    // that operator can charge it; the warning repeats every lease until an operator acts.
    log.warn({ chain_id: sub.chain_id, operator: sub.operator_address, relayer: operator }, 'this relayer cannot charge the subscription (no key for its chain, or another operator)');
    await releaseWork(ctx.pool, sub.id, sub.lease, after(LEASE_MS));
    return 'no_operator';
  }
  const clock = { startedAt: sub.started_at, intervalSeconds: sub.interval_seconds };
  const k = Math.max(1, periodIndexAt(clock, sub.next_charge_at));
  const invoice = await ensurePeriodInvoice(ctx.pool, sub, k);
  const period = periodChargeVerdict({
    status: invoice.status,
    amountAtomic: BigInt(invoice.amount_atomic ?? sub.amount_atomic),
    paidAtomic: BigInt(invoice.amount_paid_atomic),
    pendingAtomic: await pendingPaymentsAtomic(ctx.pool, invoice.id),
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
  const target: ChargeTarget = {
    contract: sub.contract_address as `0x${string}`,
    onchainId: BigInt(sub.onchain_id),
    periodIndex: k,
    paymentReference: invoice.payment_reference as `0x${string}`,
  };
  const firstAttempt = invoice.attempt_count === 0 && invoice.charge_sent_at === null && invoice.failure_code === null;
  let verdict: Awaited<ReturnType<SubscriptionRelayer['simulateCharge']>>;
  try {
    verdict = await relayer.simulateCharge(sub.chain_id, target);
  } catch (err) {
    log.warn({ err, invoice_id: invoice.id }, 'relayer could not simulate the charge; retried, not counted');
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_FAULT_MS));
    return 'relayer_fault';
  }
  if (verdict.ok) {
    let sent: { txHash: string; nonce: number };
    try {
      sent = await relayer.sendCharge(sub.chain_id, target);
    } catch (err) {
      log.warn({ err, invoice_id: invoice.id }, 'relayer could not send the charge; retried, not counted');
      await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_FAULT_MS));
      return 'relayer_fault';
    }
    if (firstAttempt) ctx.observeChargeLateness?.((Date.now() - sub.next_charge_at.getTime()) / 1000);
    await recordChargeSent(ctx.pool, invoice.id, sent.txHash);
    await releaseWork(ctx.pool, sub.id, sub.lease, after(CHECK_SENT_AFTER_MS));
    log.info({ invoice_id: invoice.id, period_index: k, tx_hash: sent.txHash, nonce: sent.nonce }, 'charge sent');
    return 'sent';
  }
  if (verdict.code === 'period_already_charged') {
    // On-chain already (this worker's earlier send, or one before a crash): the watcher pays the invoice.
    await releaseWork(ctx.pool, sub.id, sub.lease, after(CHECK_SENT_AFTER_MS));
    return 'awaiting_confirmation';
  }
  if (verdict.code === 'period_not_begun' || !isFailureCode(verdict.code)) {
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_NOT_BEGUN_MS));
    return 'retry_later';
  }
  if (firstAttempt) ctx.observeChargeLateness?.((Date.now() - sub.next_charge_at.getTime()) / 1000);
  const recorded = await recordAttemptFailed(ctx, sub, invoice, verdict.code, verdict.shortAtomic);
  if (recorded) log.info({ invoice_id: invoice.id, period_index: k, failure_code: verdict.code }, 'charge attempt failed');
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

/** Runs `fn` over `items`, at most `limit` at a time. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  });
  await Promise.all(lanes);
}
