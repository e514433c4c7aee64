// The enumerations of a payment link: what it sells, whether it takes payments, what the payer
// sees after paying, and who pays the platform fee.

export const PAYMENT_LINK_TYPES = ['fixed_price', 'custom_amount'] as const;
export type PaymentLinkType = (typeof PAYMENT_LINK_TYPES)[number];

export const PAYMENT_LINK_STATUSES = ['active', 'inactive'] as const;
export type PaymentLinkStatus = (typeof PAYMENT_LINK_STATUSES)[number];

/** After a payment: a confirmation message, or a redirect to the merchant's URL. */
export const AFTER_COMPLETIONS = ['message', 'redirect'] as const;
export type AfterCompletion = (typeof AFTER_COMPLETIONS)[number];

export const FEE_PAYERS = ['merchant', 'customer'] as const;
export type FeePayer = (typeof FEE_PAYERS)[number];
