// A subscription made on the SubscriptionManager (issue 26, /work/coord's interface): its
// Subscribed log, emitted by the chain's subscriptionManager just before the subscribe call pulls
// the first period from the subscriber, amount - fee to the payee and the fee to the fee address,
// with Transfer logs of the same transaction (its legs, never plain transfers). Counted as the
// proxy's payments are. It pays the checkout's invoice (found by the checkout reference) only when
// every term the log states is the checkout's and the checkout made no subscription yet; anything
// else (terms changed by the payer, an unknown reference, a reference used twice) is unmatched and
// counts to no invoice. Once confirmed, a matched one makes the subscription (confirmed below).
import { getAbiItem, getAddress } from 'viem';
import { sameAddress } from '../../domain/payments.js';
import { feeAtomic } from '../../domain/money.js';
import { newId } from '../../domain/ids.js';
import { createSubscriptionOfCheckout } from '../../db/subscription-chain.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../subscription-manager-abi.js';
import { getEventLogs } from '../event-logs.js';
import type { LogPosition } from '../rpc.js';
import { defineKind, type CheckoutTerms, type ObservedPayment, type SubscribedTerms } from './kind.js';
import { takePulledLegs } from './pull-legs.js';

export interface SubscribeLog extends LogPosition {
  terms: SubscribedTerms;
}

const SUBSCRIBED = getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Subscribed' });

/** Every term the wallet was asked to subscribe with is the one the contract holds. */
export function sameTerms(log: SubscribedTerms, c: CheckoutTerms): boolean {
  const endsAt = c.endsAt === null ? 0n : BigInt(Math.floor(c.endsAt.getTime() / 1000));
  return (
    sameAddress(log.contractAddress, c.contractAddress) &&
    sameAddress(log.payee, c.payee) &&
    sameAddress(log.token, c.token) &&
    log.amountAtomic === c.amountAtomic &&
    log.periodSeconds === c.periodSeconds &&
    log.feeBps === c.feeBps &&
    sameAddress(log.feeAddress, c.feeAddress) &&
    sameAddress(log.operator, c.operator) &&
    log.endsAt === endsAt
  );
}

export const subscribeKind = defineKind<'subscribe', SubscribeLog>({
  name: 'subscribe',

  async fetch(rpc, { chain }, from, to, narrow) {
    if (!chain.subscriptionManager) return [];
    const manager = chain.subscriptionManager as `0x${string}`;
    const logs = await rpc.getLogs(narrow, (c) =>
      getEventLogs(c, { address: manager, event: SUBSCRIBED, fromBlock: from, toBlock: to }),
    );
    // Only the manager's own logs (getEventLogs drops any other address a node answers).
    return logs.map(({ address, args, ...at }) => ({
      ...at,
      terms: {
        contractAddress: address.toLowerCase(),
        onchainId: args.id.toString(),
        subscriber: args.subscriber.toLowerCase(),
        checkoutReference: args.checkoutReference.toLowerCase(),
        payee: args.payee.toLowerCase(),
        token: args.token.toLowerCase(),
        amountAtomic: args.amount,
        periodSeconds: args.period,
        feeBps: args.feeBps,
        feeAddress: args.feeAddress.toLowerCase(),
        operator: args.operator.toLowerCase(),
        startedAt: BigInt(args.startedAt),
        endsAt: BigInt(args.endsAt),
      },
    }));
  },

  observe(logs, ctx) {
    return takePulledLegs(logs, ctx).map(({ event: s, n, pulled }): ObservedPayment => ({
      kind: 'subscribe',
      txHash: s.txHash,
      logIndex: s.logIndex,
      txPosition: `subscribe:${n}`,
      blockNumber: s.blockNumber,
      blockHash: s.blockHash,
      blockTimestamp: s.blockTimestamp,
      ...pulled,
      referenceTopic: null,
      subscribed: s.terms,
    }));
  },

  invoiceKeys: (p) => ({ referenceTopics: [], settlementAddresses: [], checkoutReferences: p.subscribed ? [p.subscribed.checkoutReference] : [] }),

  // The checkout's invoice, when the log states the checkout's very terms, the checkout made no
  // subscription yet (nor did an earlier log of this range) or made this very one (its
  // transaction back after a reorg deeper than the confirmations), and the payee's leg went to
  // the invoice's address in its token.
  match(p, book) {
    const terms = p.subscribed;
    const inv = terms ? book.checkout(terms.checkoutReference) : undefined;
    const checkout = inv?.checkout;
    if (!terms || !inv || !checkout || !sameTerms(terms, checkout)) return null;
    if (checkout.subscriptionId !== null && checkout.subscriptionOnchainId !== terms.onchainId) return null;
    if (!sameAddress(inv.settlementAddress, p.to) || !sameAddress(inv.tokenAddress, p.tokenAddress)) return null;
    return book.claim(`checkout:${checkout.checkoutReference}`) ? inv : null;
  },

  expectedFeeAtomic: (total, feeBps) => BigInt(feeAtomic(total.toString(), feeBps)),

  // A checkout whose invoice was voided (expired, or by the merchant) starts nothing: the
  // subscribe is recorded against it as any payment of a void invoice (invoice_void, for the
  // merchant to refund), and no subscription is made that the worker would charge every period.
  async confirmed(tx, chain, matched) {
    for (const { payment, invoiceStatus } of matched) {
      const t = payment.subscribed;
      if (!t || invoiceStatus === 'void') continue;
      // The row names addresses in EIP-55 form, as its checkout and the API's other objects do
      // (the terms are compared lower-cased; every reader of the row compares case-insensitively).
      await createSubscriptionOfCheckout(tx, {
        id: newId('sub'),
        checkoutReference: t.checkoutReference,
        chainId: chain.chainId,
        contractAddress: getAddress(t.contractAddress),
        onchainId: t.onchainId,
        subscriber: getAddress(t.subscriber),
        payee: getAddress(t.payee),
        token: getAddress(t.token),
        feeAddress: getAddress(t.feeAddress),
        operator: getAddress(t.operator),
        feeBps: t.feeBps,
        periodSeconds: t.periodSeconds,
        startedAt: new Date(Number(t.startedAt) * 1000),
        endsAt: t.endsAt === 0n ? null : new Date(Number(t.endsAt) * 1000),
      });
    }
  },
});
