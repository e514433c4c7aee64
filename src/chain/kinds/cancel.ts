// A subscription canceled on the SubscriptionManager (issue 26, /work/coord's interface): its
// Canceled(id, by) log moves no token and is no payment; once confirmed it records the cancel on
// the subscription the contract and id name (db/subscription-chain.ts recordChainCancels: the
// status turns canceled unless it is already canceled or ended, by whom the log says, and the block
// time is onchain_canceled_at). Reading it again (a rescan after a reorg) changes nothing more.
import { getAbiItem } from 'viem';
import { recordChainCancels } from '../../db/subscription-chain.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../subscription-manager-abi.js';
import { getEventLogs } from '../event-logs.js';
import type { LogPosition } from '../rpc.js';
import { defineKind, type ObservedRecord } from './kind.js';

export interface CancelLog extends LogPosition {
  contractAddress: string;
  /** The uint256 id, as a decimal string. */
  onchainId: string;
  by: string;
}

interface CancelRecord extends ObservedRecord, CancelLog {
  kind: 'cancel';
}

const CANCELED = getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Canceled' });

const isCancel = (r: ObservedRecord): r is CancelRecord => r.kind === 'cancel' && 'onchainId' in r && 'by' in r;

export const cancelKind = defineKind<'cancel', CancelLog>({
  name: 'cancel',

  async fetch(rpc, { chain }, from, to, narrow) {
    if (!chain.subscriptionManager) return [];
    const manager = chain.subscriptionManager as `0x${string}`;
    const logs = await rpc.getLogs(narrow, (c) =>
      getEventLogs(c, { address: manager, event: CANCELED, fromBlock: from, toBlock: to }),
    );
    return logs.map(({ address, args, ...at }) => ({ ...at, contractAddress: address.toLowerCase(), onchainId: args.id.toString(), by: args.by.toLowerCase() }));
  },

  // Not a payment: it takes no Transfer leg and makes no payment row.
  observe: () => [],
  invoiceKeys: () => ({ referenceTopics: [], settlementAddresses: [] }),
  match: () => null,
  expectedFeeAtomic: () => null,

  records: (logs) => logs.map((l): CancelRecord => ({ ...l, kind: 'cancel' })),

  async record(tx, chain, records, blockTimes) {
    const cancels = records.filter(isCancel).map((r) => ({
      chainId: chain.chainId,
      contractAddress: r.contractAddress,
      onchainId: r.onchainId,
      by: r.by,
      // The block's time from its header, which the watcher checked against the log's block hash:
      // never a time the log's own answer carries.
      at: blockTimes.get(r.blockNumber) ?? new Date(),
    }));
    const known = await recordChainCancels(tx, cancels);
    return { recorded: known, ignored: cancels.length - known };
  },
});
