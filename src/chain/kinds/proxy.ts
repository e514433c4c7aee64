// The fee proxy's payment: Request Network's ERC20FeeProxy emits TransferWithReferenceAndFee
// after moving the token with its own Transfer logs (the merchant's leg, then the fee's leg when
// the fee moves at all). Those legs are this payment, never a second one, whatever their
// destination; what it moved is read from them, not from the event's claim: the proxy emits
// `feeAmount` even when it moved no fee (fee address zero). It pays the invoice of its reference.
import { sameAddress, type PaymentReceipt } from '../../domain/payments.js';
import { feeAtomic } from '../../domain/money.js';
import { TRANSFER_WITH_REFERENCE_AND_FEE } from '../abi.js';
import { getEventLogs } from '../event-logs.js';
import type { LogPosition } from '../rpc.js';
import { defineKind, type ObservedPayment } from './kind.js';

export interface ProxyLog extends LogPosition {
  tokenAddress: string;
  to: string;
  amount: bigint;
  /** keccak256 of the reference's bytes: an indexed `bytes` is stored as its hash. */
  referenceTopic: string;
  feeAmount: bigint;
  feeAddress: string;
}

const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

export const proxyKind = defineKind<'proxy', ProxyLog>({
  name: 'proxy',

  async fetch(rpc, { chain }, from, to, narrow) {
    if (!chain.feeProxy) return [];
    const proxy = chain.feeProxy as `0x${string}`;
    const logs = await rpc.getLogs(narrow, (c) => getEventLogs(c, { address: proxy, event: TRANSFER_WITH_REFERENCE_AND_FEE, fromBlock: from, toBlock: to }));
    // A proxy event names any token its caller likes: only the chain's own tokens are payments.
    const tokens = new Set(chain.tokens.map((t) => t.address.toLowerCase()));
    return logs
      .filter((l) => tokens.has(l.args.tokenAddress.toLowerCase()))
      .map(({ address: _proxy, args, ...at }) => ({
        ...at,
        tokenAddress: args.tokenAddress,
        to: args.to,
        amount: args.amount,
        referenceTopic: args.paymentReference,
        feeAmount: args.feeAmount,
        feeAddress: args.feeAddress,
      }));
  },

  observe(logs, { legs, feeAddress }) {
    const out: ObservedPayment[] = [];
    const byTx = new Map<string, ProxyLog[]>();
    for (const p of logs) {
      const same = byTx.get(p.txHash);
      if (same) same.push(p);
      else byTx.set(p.txHash, [p]);
    }
    for (const proxies of byTx.values()) {
      proxies.sort((a, b) => a.logIndex - b.logIndex);
      let after = -1;
      proxies.forEach((p, n) => {
        // The proxy's transferFrom to `to`, then (when the fee moves) to `feeAddress`, come before its
        // event and after the previous proxy event of the same transaction (a batch of calls).
        // The nearest matching ones: a transfer the caller made before the call is not one of its legs.
        const window = legs.free(p.txHash).filter((t) => t.logIndex > after && t.logIndex < p.logIndex && sameAddress(t.tokenAddress, p.tokenAddress));
        const feeMoves = p.feeAmount > 0n && !sameAddress(p.feeAddress, ZERO_ADDRESS);
        const feeLeg = feeMoves ? window.findLast((t) => sameAddress(t.to, p.feeAddress) && t.value === p.feeAmount) : undefined;
        const merchantLeg = window.findLast((t) => t !== feeLeg && (!feeLeg || t.logIndex < feeLeg.logIndex) && sameAddress(t.to, p.to) && t.value === p.amount);
        legs.take(merchantLeg);
        legs.take(feeLeg);
        after = p.logIndex;
        const receipt: PaymentReceipt = {
          // The merchant paying itself moved nothing to the merchant (the fee alone moved).
          receivedAtomic: merchantLeg && !sameAddress(merchantLeg.from, merchantLeg.to) ? merchantLeg.value : 0n,
          feeReceivedAtomic: feeLeg && sameAddress(feeLeg.to, feeAddress) ? feeLeg.value : 0n,
        };
        out.push({
          kind: 'proxy',
          txHash: p.txHash,
          logIndex: p.logIndex,
          txPosition: `proxy:${n}`,
          blockNumber: p.blockNumber,
          blockHash: p.blockHash,
          blockTimestamp: p.blockTimestamp,
          tokenAddress: p.tokenAddress,
          from: merchantLeg?.from ?? null,
          to: p.to,
          amountAtomic: p.amount,
          feeAtomic: p.feeAmount,
          feeAddress: p.feeAddress,
          referenceTopic: p.referenceTopic,
          ...receipt,
        });
      });
    }
    return out;
  },

  invoiceKeys: (p) => ({ referenceTopics: p.referenceTopic ? [p.referenceTopic] : [], settlementAddresses: [] }),

  // The invoice of its reference, when the payment went to that invoice's address in its token.
  match(p, book) {
    const inv = p.referenceTopic ? book.referenced(p.referenceTopic) : undefined;
    return inv && sameAddress(inv.settlementAddress, p.to) && sameAddress(inv.tokenAddress, p.tokenAddress) ? inv : null;
  },

  expectedFeeAtomic: (total, feeBps) => BigInt(feeAtomic(total.toString(), feeBps)),
});
