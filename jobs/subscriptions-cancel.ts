// `subscriptions.cancel`: on its own job scheduler (every SUBSCRIPTION_POLL_INTERVAL_MS). A
// subscription the merchant (POST /v1/subscriptions/{id}/cancel) or dunning canceled must also be
// canceled on-chain, so that the contract refuses every later charge whoever asks. Its trigger made
// it due (next_work_at) at the cancel; this job claims it as the charges are claimed and has the
// relayer send `cancel(id)`; the watcher's Canceled log sets onchain_canceled_at. Not seen on-chain
// a while later: looked at again; a cancel the chain already holds (a simulated charge answers
// subscription_canceled) is not sent twice.
import { claimCancelWork, recordCancelSent, releaseWork, type SubscriptionWork } from '../src/db/subscriptions.js';
import type { JobHandler } from '../src/queue/dispatcher.js';
import type { JobContext, SubscriptionRelayer } from '../src/queue/job-context.js';
import type { Logger } from '../src/log.js';

const BATCH = 50;
const LEASE_MS = 120_000;
/** A sent cancel not seen on-chain this much later is looked at again. */
const CHECK_SENT_AFTER_MS = 60_000;
const RETRY_FAULT_MS = 10_000;

type Outcome = 'sent' | 'awaiting_confirmation' | 'relayer_fault' | 'no_operator' | 'lease_lost';

export const subscriptionsCancel: JobHandler<Record<string, never>, JobContext> = async (_payload, ctx) => {
  const relayer = ctx.relayer;
  if (!relayer) return 'no relayer in this process';
  const tally = new Map<Outcome, number>();
  for (;;) {
    const claimed = await claimCancelWork(ctx.pool, BATCH, LEASE_MS);
    for (const sub of claimed) {
      let outcome: Outcome;
      try {
        outcome = await cancelOne(sub, ctx, relayer);
      } catch (err) {
        ctx.log.error({ err, subscription_id: sub.id }, 'on-chain cancel failed; retried when its lease ends');
        outcome = 'relayer_fault';
      }
      tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
      ctx.countSubscriptionWork?.('subscriptions.cancel', outcome);
    }
    if (claimed.length < BATCH) break;
  }
  if (tally.size === 0) return 'nothing due';
  ctx.log.info(Object.fromEntries(tally), 'on-chain cancels looked at');
  return [...tally].map(([k, v]) => `${k} ${v}`).join(', ');
};

async function cancelOne(sub: SubscriptionWork, ctx: JobContext & { log: Logger }, relayer: SubscriptionRelayer): Promise<Outcome> {
  const after = (ms: number) => new Date(Date.now() + ms);
  const operator = relayer.operatorAddress(sub.chain_id);
  if (operator === null || (sub.operator_address !== null && sub.operator_address.toLowerCase() !== operator.toLowerCase())) {
    ctx.log.warn({ subscription_id: sub.id, chain_id: sub.chain_id, operator: sub.operator_address, relayer: operator }, 'this relayer cannot cancel the subscription on-chain (no key for its chain, or another operator)');
    await releaseWork(ctx.pool, sub.id, sub.lease, after(LEASE_MS));
    return 'no_operator';
  }
  const contract = sub.contract_address as `0x${string}`;
  const onchainId = BigInt(sub.onchain_id);
  try {
    if (sub.cancel_sent_at !== null) {
      // Sent before: does the chain hold it already? A charge of any later period says so.
      const probe = await relayer.simulateCharge(sub.chain_id, { contract, onchainId, periodIndex: 2 ** 32 - 1, paymentReference: '0x0000000000000000' });
      if (!probe.ok && probe.code === 'subscription_canceled') {
        await releaseWork(ctx.pool, sub.id, sub.lease, after(CHECK_SENT_AFTER_MS));
        return 'awaiting_confirmation';
      }
    }
    const sent = await relayer.sendCancel(sub.chain_id, { contract, onchainId });
    const ok = await recordCancelSent(ctx.pool, sub.id, sub.lease, sent.txHash, after(CHECK_SENT_AFTER_MS));
    ctx.log.info({ subscription_id: sub.id, tx_hash: sent.txHash, canceled_by: sub.canceled_by }, 'on-chain cancel sent');
    return ok ? 'sent' : 'lease_lost';
  } catch (err) {
    ctx.log.warn({ err, subscription_id: sub.id }, 'relayer could not send the cancel; retried');
    await releaseWork(ctx.pool, sub.id, sub.lease, after(RETRY_FAULT_MS));
    return 'relayer_fault';
  }
}
