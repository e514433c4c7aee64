// A subscription period charged by the SubscriptionManager (issue 26, /work/coord's interface):
// Charged(id, periodIndex, paymentReference), emitted by the chain's subscriptionManager just before
// it pulls the period from the subscriber, amount - fee to the payee and the fee to the fee address,
// with Transfer logs of the same transaction (its legs). Counted as the proxy's payments are: what
// those legs moved, the fee only when it reached the chain's fee address. It pays the invoice whose
// payment reference it names only when that invoice is the named period of that subscription of
// that contract; anything else is unmatched.
import { getAbiItem, keccak256 } from 'viem';
import { sameAddress } from '../../domain/payments.js';
import { feeAtomic } from '../../domain/money.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../subscription-manager-abi.js';
import { position, type LogPosition } from '../rpc.js';
import { defineKind, type ObservedPayment } from './kind.js';

export interface ChargeLog extends LogPosition {
  contractAddress: string;
  onchainId: bigint;
  periodIndex: number;
  /** The period invoice's 8-byte payment reference (0x + 16 hex). */
  paymentReference: string;
}

const CHARGED = getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Charged' });

export const chargeKind = defineKind<'charge', ChargeLog>({
  name: 'charge',

  async fetch(rpc, { chain }, from, to, narrow) {
    if (!chain.subscriptionManager) return [];
    const manager = chain.subscriptionManager as `0x${string}`;
    const logs = await rpc.getLogs(narrow, (c) =>
      c.getLogs({ address: manager, event: CHARGED, fromBlock: from, toBlock: to, strict: true }),
    );
    return logs.map((l) => ({
      ...position(l),
      contractAddress: l.address,
      onchainId: l.args.id,
      periodIndex: l.args.periodIndex,
      paymentReference: l.args.paymentReference.toLowerCase(),
    }));
  },

  observe(logs, { legs, feeAddress }) {
    const out: ObservedPayment[] = [];
    const byTx = new Map<string, ChargeLog[]>();
    for (const c of logs) {
      const same = byTx.get(c.txHash);
      if (same) same.push(c);
      else byTx.set(c.txHash, [c]);
    }
    for (const charges of byTx.values()) {
      charges.sort((a, b) => a.logIndex - b.logIndex);
      charges.forEach((c, n) => {
        // The contract emits Charged, then pulls: the legs are the Transfer logs after the event and
        // before the transaction's next charge. The first is the payee's share; a fee leg follows
        // it only when the fee did not round to zero, and counts only when it reached the chain's fee address.
        const before = charges[n + 1]?.logIndex ?? Number.POSITIVE_INFINITY;
        const window = legs.free(c.txHash).filter((t) => t.logIndex > c.logIndex && t.logIndex < before);
        const merchantLeg = window.find((t) => !sameAddress(t.to, feeAddress));
        const feeLeg = merchantLeg ? window.find((t) => t.logIndex > merchantLeg.logIndex && sameAddress(t.tokenAddress, merchantLeg.tokenAddress) && sameAddress(t.from, merchantLeg.from)) : undefined;
        legs.take(merchantLeg);
        legs.take(feeLeg);
        out.push({
          kind: 'charge',
          txHash: c.txHash,
          logIndex: c.logIndex,
          txPosition: `charge:${n}`,
          blockNumber: c.blockNumber,
          blockHash: c.blockHash,
          blockTimestamp: c.blockTimestamp,
          // No leg (a token the chain does not list, a payee nobody watches): nothing moved that counts.
          tokenAddress: merchantLeg?.tokenAddress ?? '0x0000000000000000000000000000000000000000',
          from: merchantLeg?.from ?? null,
          to: merchantLeg?.to ?? '0x0000000000000000000000000000000000000000',
          amountAtomic: (merchantLeg?.value ?? 0n) + (feeLeg?.value ?? 0n),
          feeAtomic: feeLeg?.value ?? 0n,
          feeAddress: feeLeg?.to ?? null,
          referenceTopic: keccak256(c.paymentReference as `0x${string}`),
          receivedAtomic: merchantLeg?.value ?? 0n,
          feeReceivedAtomic: feeLeg && sameAddress(feeLeg.to, feeAddress) ? feeLeg.value : 0n,
          subscriptionPeriod: { contractAddress: c.contractAddress, onchainId: c.onchainId.toString(), periodIndex: c.periodIndex },
        });
      });
    }
    return out;
  },

  invoiceKeys: (p) => ({ referenceTopics: p.referenceTopic ? [p.referenceTopic] : [], settlementAddresses: [] }),

  // The invoice of its reference, when it is that period of that subscription of that contract and
  // the payee's leg went to its address in its token.
  match(p, book) {
    const inv = p.referenceTopic ? book.referenced(p.referenceTopic) : undefined;
    const claimed = p.subscriptionPeriod;
    const period = inv?.subscriptionPeriod;
    if (!inv || !claimed || !period) return null;
    const same = sameAddress(period.contractAddress, claimed.contractAddress) && period.onchainId === claimed.onchainId && period.periodIndex === claimed.periodIndex;
    return same && sameAddress(inv.settlementAddress, p.to) && sameAddress(inv.tokenAddress, p.tokenAddress) ? inv : null;
  },

  expectedFeeAtomic: (total, feeBps) => BigInt(feeAtomic(total.toString(), feeBps)),
});
