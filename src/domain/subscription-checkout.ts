// The pure rules of a subscription checkout (POST /pay/<link id>/subscribe, docs/subscriptions.md):
// its 32-byte reference and the allowance the page asks the wallet for.
import { randomBytes } from 'node:crypto';

/**
 * The allowance asked of the wallet covers this many periods (the first, paid by the subscribe
 * call, included): enough that a year of a monthly subscription needs one approval, small enough
 * that the wallet's approval prompt names a bounded sum. When it runs out a charge fails with
 * insufficient_allowance and the dunning email asks the customer to approve again.
 */
export const SUBSCRIPTION_ALLOWANCE_PERIODS = 12;

/** What the page asks the wallet to approve to the SubscriptionManager: amount x SUBSCRIPTION_ALLOWANCE_PERIODS. */
export function subscriptionAllowanceAtomic(amountAtomic: bigint): bigint {
  return amountAtomic * BigInt(SUBSCRIPTION_ALLOWANCE_PERIODS);
}

/** A checkout's reference: `0x` + 64 lowercase hex (bytes32), random, carried by the Subscribed event. */
export function newCheckoutReference(): string {
  return `0x${randomBytes(32).toString('hex')}`;
}

/** The contract's Terms.amount is a uint96: a price above it cannot be subscribed to. */
export const MAX_TERMS_AMOUNT_ATOMIC = (1n << 96n) - 1n;
/** The contract's Terms.period is a uint32. */
export const MAX_TERMS_PERIOD_SECONDS = 2 ** 32 - 1;
