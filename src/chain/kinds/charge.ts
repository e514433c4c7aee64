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
import { getEventLogs } from '../event-logs.js';
import type { LogPosition } from '../rpc.js';
import { defineKind, type ObservedPayment } from './kind.js';
import { takePulledLegs } from './pull-legs.js';

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
      getEventLogs(c, { address: manager, event: CHARGED, fromBlock: from, toBlock: to }),
    );
    // Only the manager's own logs (getEventLogs drops any other address a node answers): another
    // contract's would take the Transfer legs of its transaction as a charge's.
    return logs.map(({ address, args, ...at }) => ({
      ...at,
      contractAddress: address.toLowerCase(),
      onchainId: args.id,
      periodIndex: args.periodIndex,
      paymentReference: args.paymentReference.toLowerCase(),
    }));
  },

  observe(logs, ctx) {
    return takePulledLegs(logs, ctx).map(({ event: c, n, pulled }): ObservedPayment => ({
      kind: 'charge',
      txHash: c.txHash,
      logIndex: c.logIndex,
      txPosition: `charge:${n}`,
      blockNumber: c.blockNumber,
      blockHash: c.blockHash,
      blockTimestamp: c.blockTimestamp,
      ...pulled,
      referenceTopic: keccak256(c.paymentReference as `0x${string}`),
      subscriptionPeriod: { contractAddress: c.contractAddress, onchainId: c.onchainId.toString(), periodIndex: c.periodIndex },
    }));
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
