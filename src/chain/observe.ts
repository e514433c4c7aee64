// From a range's logs to the payments seen in it. A proxy payment moves the token with its own
// Transfer logs (the merchant's leg, then the fee's leg when the fee moves at all): those logs are
// the same payment, never a second one, whatever their destination, so a transaction's value is
// counted once. What a proxy payment moved is read from those Transfer logs, not from the
// event's claim: ERC20FeeProxy emits `feeAmount` even when it moved no fee (fee address zero).
// Pure: unit- and property-tested directly.
import { sameAddress, type PaymentKind } from '../domain/payments.js';
import type { ProxyLog, TransferLog } from './rpc.js';

export interface ObservedPayment {
  kind: PaymentKind;
  txHash: string;
  logIndex: number;
  /**
   * The payment's place within its transaction, which a re-inclusion of the same transaction in
   * another block keeps (the block's log index does not): `proxy:<n>` for the transaction's n-th
   * proxy payment, `transfer:<token>:<to>:<n>` for its n-th plain transfer of that token to that
   * address (lower case).
   */
  txPosition: string;
  blockNumber: bigint;
  blockHash: string;
  blockTimestamp: bigint | null;
  tokenAddress: string;
  from: string | null;
  to: string;
  /** proxy: the call's amount (the merchant's share, as claimed); transfer: the value. */
  amountAtomic: bigint;
  /** proxy: the call's feeAmount (as claimed); transfer: 0. */
  feeAtomic: bigint;
  feeAddress: string | null;
  /** proxy only: keccak256 of the payment reference. */
  referenceTopic: string | null;
  /** What a Transfer log of the transaction shows reached `to` for this payment (0 when none does). */
  receivedAtomic: bigint;
  /** What a Transfer log shows reached the chain's own fee address as this payment's fee (else 0). */
  feeReceivedAtomic: bigint;
}

const lower = (a: string) => a.toLowerCase();
const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

/**
 * Proxy payments and the plain transfers that are not part of one, in chain order. `feeAddress`:
 * the chain's configured fee address (a fee counts only when it went there); the Transfer logs
 * given should include those to it, or no fee is seen as received. A Transfer to the fee address
 * that no proxy payment caused is nobody's payment.
 */
export function observePayments(proxyLogsAsGiven: readonly ProxyLog[], transferLogsAsGiven: readonly TransferLog[], feeAddress: string | null = null): ObservedPayment[] {
  // A node (or a fallback of two) may answer the same log twice, or one transaction in two blocks
  // (an answer spanning a reorg): one log is one log, and a transaction lives in one block.
  const proxyLogs = onceEach(proxyLogsAsGiven);
  const transferLogs = onceEach(transferLogsAsGiven);
  const blockOfTx = new Map<string, string>();
  for (const l of [...proxyLogs, ...transferLogs]) {
    const seen = blockOfTx.get(l.txHash);
    if (seen !== undefined && seen !== l.blockHash) throw new InconsistentLogsError(`transaction ${l.txHash} is in two blocks (${seen}, ${l.blockHash}) of one answer`);
    blockOfTx.set(l.txHash, l.blockHash);
  }
  const claimed = new Set<TransferLog>();
  const out: ObservedPayment[] = [];
  // By transaction: a range can hold thousands of each, and each proxy log looks only at its own.
  const byTx = new Map<string, TransferLog[]>();
  for (const t of transferLogs) {
    const same = byTx.get(t.txHash);
    if (same) same.push(t);
    else byTx.set(t.txHash, [t]);
  }
  for (const list of byTx.values()) list.sort((a, b) => a.logIndex - b.logIndex);
  const proxiesByTx = new Map<string, ProxyLog[]>();
  for (const p of proxyLogs) {
    const same = proxiesByTx.get(p.txHash);
    if (same) same.push(p);
    else proxiesByTx.set(p.txHash, [p]);
  }
  for (const [txHash, proxies] of proxiesByTx) {
    proxies.sort((a, b) => a.logIndex - b.logIndex);
    const transfers = byTx.get(txHash) ?? [];
    let after = -1;
    proxies.forEach((p, n) => {
      // The proxy's transferFrom to `to`, then (when the fee moves) to `feeAddress`, come before its
      // event and after the previous proxy event of the same transaction (a batch of calls).
      // The nearest matching ones: a transfer the caller made before the call is not one of its legs.
      const window = transfers.filter((t) => !claimed.has(t) && t.logIndex > after && t.logIndex < p.logIndex && sameAddress(t.tokenAddress, p.tokenAddress));
      const feeMoves = p.feeAmount > 0n && !sameAddress(p.feeAddress, ZERO_ADDRESS);
      const feeLeg = feeMoves ? window.findLast((t) => sameAddress(t.to, p.feeAddress) && t.value === p.feeAmount) : undefined;
      const merchantLeg = window.findLast((t) => t !== feeLeg && (!feeLeg || t.logIndex < feeLeg.logIndex) && sameAddress(t.to, p.to) && t.value === p.amount);
      if (merchantLeg) claimed.add(merchantLeg);
      if (feeLeg) claimed.add(feeLeg);
      after = p.logIndex;
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
        receivedAtomic: merchantLeg ? merchantLeg.value : 0n,
        feeReceivedAtomic: feeLeg && sameAddress(feeLeg.to, feeAddress) ? feeLeg.value : 0n,
      });
    });
  }
  const ordinals = new Map<string, number>();
  for (const list of byTx.values()) {
    for (const t of list) {
      if (claimed.has(t) || sameAddress(t.to, feeAddress)) continue;
      const slot = `${lower(t.tokenAddress)}:${lower(t.to)}`;
      const n = ordinals.get(`${t.txHash}|${slot}`) ?? 0;
      ordinals.set(`${t.txHash}|${slot}`, n + 1);
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
        receivedAtomic: t.value,
        feeReceivedAtomic: 0n,
      });
    }
  }
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}

/** A node's answer that cannot be a chain's (one transaction in two blocks): the run fails and is retried, nothing is recorded. */
export class InconsistentLogsError extends Error {}

/** The logs without repeats: a log is its block and its index in it. */
function onceEach<T extends { blockHash: string; logIndex: number }>(logs: readonly T[]): T[] {
  const seen = new Set<string>();
  return logs.filter((l) => {
    const k = `${l.blockHash}:${l.logIndex}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
