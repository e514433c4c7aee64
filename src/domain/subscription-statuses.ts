// A subscription's statuses and who may have canceled it (docs/subscriptions.md, "Lifecycle"):
// one list each, which the API schemas and the SQL check constraints follow.

/** active -> past_due (a failed charge) -> active (paid); canceled and ended are final. */
export const SUBSCRIPTION_STATUSES = ['active', 'past_due', 'canceled', 'ended'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** Who canceled: the customer on-chain, the merchant over the API, or dunning after the last attempt. */
export const CANCELED_BY = ['customer', 'merchant', 'dunning'] as const;
export type CanceledBy = (typeof CANCELED_BY)[number];
