// From a range's logs to the payments seen in it, over every kind of log (kinds/index.ts): each
// kind's logs are fetched at once, taken once each, and observed in the list's order, the Transfer
// legs a kind's payment takes never becoming a second payment, so a transaction's value is counted
// once. Pure past the fetch: unit- and property-tested directly.
import type { LogPosition, ChainRpc } from './rpc.js';
import { InconsistentLogsError } from './inconsistent-answer.js';
import { KINDS, type LogsByKind } from './kinds/index.js';
import { TransferLegs, type ObservedPayment, type ObservedRecord, type ScanScope } from './kinds/kind.js';

export type { ObservedPayment, ObservedRecord } from './kinds/kind.js';

export type { LogsByKind } from './kinds/index.js';

export { InconsistentLogsError } from './inconsistent-answer.js';

/** Every kind's logs of [from, to]; a refusal of the range by the provider is thrown as it came. */
export async function fetchLogs(rpc: ChainRpc, scope: ScanScope, from: bigint, to: bigint, narrow: boolean): Promise<LogsByKind> {
  const logs = await Promise.all(KINDS.map((k) => k.fetch(rpc, scope, from, to, narrow)));
  return Object.fromEntries(KINDS.map((k, i) => [k.name, logs[i]])) as LogsByKind;
}

/**
 * The payments of a range's logs, in chain order. `feeAddress`: the chain's configured fee
 * address (a fee counts only when it went there); the transfer kind's logs should include those
 * to it, or no fee is seen as received.
 */
export function observePayments(logsAsGiven: LogsByKind, feeAddress: string | null = null): ObservedPayment[] {
  // A node (or a fallback of two) may answer the same log twice, or one transaction in two blocks
  // (an answer spanning a reorg): one log is one log, and a transaction lives in one block.
  const given = logsAsGiven as Partial<Record<string, readonly LogPosition[]>>;
  const logs = new Map(KINDS.map((k) => [k, onceEach(given[k.name] ?? [])]));
  const blockOfTx = new Map<string, string>();
  for (const l of [...logs.values()].flat()) {
    const seen = blockOfTx.get(l.txHash);
    if (seen !== undefined && seen !== l.blockHash) throw new InconsistentLogsError(`transaction ${l.txHash} is in two blocks (${seen}, ${l.blockHash}) of one answer`);
    blockOfTx.set(l.txHash, l.blockHash);
  }
  const legs = new TransferLegs([...logs].flatMap(([k, own]) => (k.legs ? k.legs(own) : [])));
  const out = [...logs].flatMap(([k, own]) => k.observe(own, { legs, feeAddress }));
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}

/** The range's logs that are no payments but are recorded once confirmed (a kind's `records`), in chain order. */
export function observeRecords(logsAsGiven: LogsByKind): ObservedRecord[] {
  const given = logsAsGiven as Partial<Record<string, readonly LogPosition[]>>;
  const out = KINDS.flatMap((k) => (k.records ? k.records(onceEach(given[k.name] ?? [])) : []));
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}


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
