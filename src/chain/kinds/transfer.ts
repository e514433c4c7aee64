// A plain token Transfer to a settlement address: no reference, so it pays the one open or overdue
// invoice of that address and token that it settles exactly (matchTransfer in the domain). Its
// logs are also the legs other kinds take (kind.ts TransferLegs): it observes last, and a
// Transfer no other kind took is a plain transfer unless it went to the chain's fee address (a fee
// no payment caused is nobody's payment).
import { matchTransfer, sameAddress } from '../../domain/payments.js';
import { ERC20_TRANSFER } from '../abi.js';
import { getEventLogs } from '../event-logs.js';
import { defineKind, type ObservedPayment, type TransferLog } from './kind.js';

/** Recipients per eth_getLogs call: providers bound the topics of one filter. */
const RECIPIENTS_PER_CALL = 500;

const lower = (a: string) => a.toLowerCase();

export const transferKind = defineKind<'transfer', TransferLog>({
  name: 'transfer',

  async fetch(rpc, { chain, recipients }, from, to, narrow) {
    if (recipients.length === 0 || chain.tokens.length === 0) return [];
    // The fee address too: a proxy payment's fee counts only when its Transfer went there.
    const watched = chain.feeAddress ? [...recipients, lower(chain.feeAddress)] : [...recipients];
    const tokens = chain.tokens.map((t) => t.address as `0x${string}`);
    const out: TransferLog[] = [];
    // Narrow: one eth_getLogs per recipient, each asked again without a size limit if still too big.
    const perCall = narrow ? 1 : RECIPIENTS_PER_CALL;
    for (let i = 0; i < watched.length; i += perCall) {
      const batch = watched.slice(i, i + perCall) as `0x${string}`[];
      const logs = await rpc.getLogs(narrow, (c) => getEventLogs(c, { address: tokens, event: ERC20_TRANSFER, args: { to: batch }, fromBlock: from, toBlock: to }));
      for (const { address, args, ...at } of logs) out.push({ ...at, tokenAddress: address, from: args.from, to: args.to, value: args.value });
    }
    return out;
  },

  legs: (logs) => logs,

  observe(_logs, { legs, feeAddress }) {
    const out: ObservedPayment[] = [];
    for (const list of legs.allFree()) {
      const ordinals = new Map<string, number>();
      for (const t of list) {
        if (sameAddress(t.to, feeAddress)) continue;
        const slot = `${lower(t.tokenAddress)}:${lower(t.to)}`;
        const n = ordinals.get(slot) ?? 0;
        ordinals.set(slot, n + 1);
        legs.take(t);
        out.push({
          kind: 'transfer',
          txHash: t.txHash,
          logIndex: t.logIndex,
          txPosition: `transfer:${slot}:${n}`,
          blockNumber: t.blockNumber,
          blockHash: t.blockHash,
          blockTimestamp: t.blockTimestamp,
          tokenAddress: t.tokenAddress,
          from: t.from,
          to: t.to,
          amountAtomic: t.value,
          feeAtomic: 0n,
          feeAddress: null,
          referenceTopic: null,
          // From the settlement address to itself: nothing reached the merchant (the detector
          // records no payment, as for a zero-value transfer).
          receivedAtomic: sameAddress(t.from, t.to) ? 0n : t.value,
          feeReceivedAtomic: 0n,
        });
      }
    }
    return out;
  },

  invoiceKeys: (p) => ({ referenceTopics: [], settlementAddresses: [], owing: [{ address: lower(p.to), remainingAtomic: p.receivedAtomic }] }),

  match: (p, book) => matchTransfer(book.owing(p.to, p.tokenAddress, p.receivedAtomic), p.receivedAtomic),

  expectedFeeAtomic: () => null,
});
