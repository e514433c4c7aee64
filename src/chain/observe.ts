// From a range's logs to the payments seen in it. A proxy payment moves the token with its own
// Transfer log to the merchant: that log is the same payment, never a second one (it lends the
// proxy payment its payer). Pure: unit-tested directly.
import type { PaymentKind } from '../domain/payments.js';
import type { ProxyLog, TransferLog } from './rpc.js';

export interface ObservedPayment {
  kind: PaymentKind;
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  blockTimestamp: bigint | null;
  tokenAddress: string;
  from: string | null;
  to: string;
  /** proxy: the call's amount (the merchant's share); transfer: the value. */
  amountAtomic: bigint;
  /** proxy: the call's feeAmount; transfer: 0. */
  feeAtomic: bigint;
  feeAddress: string | null;
  /** proxy only: keccak256 of the payment reference. */
  referenceTopic: string | null;
}

const lower = (a: string) => a.toLowerCase();

/** Proxy payments and the plain transfers that are not part of one, in chain order. */
export function observePayments(proxyLogs: readonly ProxyLog[], transferLogs: readonly TransferLog[]): ObservedPayment[] {
  const claimed = new Set<TransferLog>();
  const out: ObservedPayment[] = [];
  // By transaction: a range can hold thousands of each, and each proxy log looks only at its own.
  const byTx = new Map<string, TransferLog[]>();
  for (const t of transferLogs) {
    const same = byTx.get(t.txHash);
    if (same) same.push(t);
    else byTx.set(t.txHash, [t]);
  }
  for (const p of proxyLogs) {
    // The proxy's transferFrom to `to` comes before its event in the same transaction.
    const own = (byTx.get(p.txHash) ?? []).find(
      (t) =>
        !claimed.has(t) &&
        t.txHash === p.txHash &&
        t.logIndex < p.logIndex &&
        lower(t.tokenAddress) === lower(p.tokenAddress) &&
        lower(t.to) === lower(p.to) &&
        t.value === p.amount,
    );
    if (own) claimed.add(own);
    out.push({
      kind: 'proxy',
      txHash: p.txHash,
      logIndex: p.logIndex,
      blockNumber: p.blockNumber,
      blockHash: p.blockHash,
      blockTimestamp: p.blockTimestamp,
      tokenAddress: p.tokenAddress,
      from: own?.from ?? null,
      to: p.to,
      amountAtomic: p.amount,
      feeAtomic: p.feeAmount,
      feeAddress: p.feeAddress,
      referenceTopic: p.referenceTopic,
    });
  }
  for (const t of transferLogs) {
    if (claimed.has(t)) continue;
    out.push({
      kind: 'transfer',
      txHash: t.txHash,
      logIndex: t.logIndex,
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
    });
  }
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}
