// The SubscriptionManager's pull (Subscribed and Charged logs, docs/subscriptions.md): the contract
// emits its event, then pulls the period from the subscriber, so the event's legs are the Transfer
// logs after it and before the transaction's next event of the same kind: the payee's share first,
// the fee after it (only when it did not round to zero), from the same payer in the same token.
// What counts is what those legs moved, the fee only when it reached the chain's fee address: the
// proxy's money rules (issue 24). One home for both kinds.
import { sameAddress } from '../../domain/payments.js';
import type { LogPosition } from '../rpc.js';
import type { ObserveContext, ObservedPayment } from './kind.js';

const ZERO = '0x0000000000000000000000000000000000000000';

/** What an event's legs moved, as the payment's fields. */
export type PulledAmounts = Pick<ObservedPayment, 'tokenAddress' | 'from' | 'to' | 'amountAtomic' | 'feeAtomic' | 'feeAddress' | 'receivedAtomic' | 'feeReceivedAtomic'>;

/**
 * Each event with its position among its transaction's events of this kind and what its legs
 * moved; the legs are taken from `ctx.legs` (never plain transfers too). Grouped by transaction,
 * each transaction's events in log order.
 */
export function takePulledLegs<T extends LogPosition>(events: readonly T[], { legs, feeAddress }: ObserveContext): { event: T; n: number; pulled: PulledAmounts }[] {
  const byTx = new Map<string, T[]>();
  for (const e of events) {
    const same = byTx.get(e.txHash);
    if (same) same.push(e);
    else byTx.set(e.txHash, [e]);
  }
  const out: { event: T; n: number; pulled: PulledAmounts }[] = [];
  for (const list of byTx.values()) {
    list.sort((a, b) => a.logIndex - b.logIndex);
    list.forEach((event, n) => {
      const before = list[n + 1]?.logIndex ?? Number.POSITIVE_INFINITY;
      const window = legs.free(event.txHash).filter((t) => t.logIndex > event.logIndex && t.logIndex < before);
      const merchantLeg = window.find((t) => !sameAddress(t.to, feeAddress));
      const feeLeg = merchantLeg
        ? window.find((t) => t.logIndex > merchantLeg.logIndex && sameAddress(t.tokenAddress, merchantLeg.tokenAddress) && sameAddress(t.from, merchantLeg.from))
        : undefined;
      legs.take(merchantLeg);
      legs.take(feeLeg);
      out.push({
        event,
        n,
        pulled: {
          // No leg (a token the chain does not list, a payee nobody watches): nothing moved that counts.
          tokenAddress: merchantLeg?.tokenAddress ?? ZERO,
          from: merchantLeg?.from ?? null,
          to: merchantLeg?.to ?? ZERO,
          amountAtomic: (merchantLeg?.value ?? 0n) + (feeLeg?.value ?? 0n),
          feeAtomic: feeLeg?.value ?? 0n,
          feeAddress: feeLeg?.to ?? null,
          receivedAtomic: merchantLeg?.value ?? 0n,
          feeReceivedAtomic: feeLeg && sameAddress(feeLeg.to, feeAddress) ? feeLeg.value : 0n,
        },
      });
    });
  }
  return out;
}
