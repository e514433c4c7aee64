// Schemas of the payment link routes and the payments a link took.
import { type Static, Type } from 'typebox';
import { HTTP_URL_KEYWORD } from '../ajv-keywords.js';
import { DateTime, literals, Nullable } from './parts.js';
import { AFTER_COMPLETIONS, FEE_PAYERS, PAYMENT_LINK_STATUSES, PAYMENT_LINK_TYPES } from '../../domain/payment-links.js';
import { DecimalString, ShortText } from './common.js';

export const PaymentLink = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    type: literals(PAYMENT_LINK_TYPES),
    status: literals(PAYMENT_LINK_STATUSES),
    url: Type.String(),
    price_id: Nullable(Type.String()),
    min_amount: Nullable(Type.String()),
    max_amount: Nullable(Type.String()),
    preset_amount: Nullable(Type.String()),
    collect_email: Type.Boolean(),
    collect_name: Type.Boolean(),
    collect_phone: Type.Boolean(),
    collect_address: Type.Boolean(),
    max_payments: Nullable(Type.Integer()),
    /** Simulated payments and checkouts paid on-chain: what max_payments and the delete guard count. */
    payment_count: Type.Integer({ description: 'Payments the link took: simulated ones and its checkouts paid in full on-chain (confirmed); a checkout partly paid counts once paid. max_payments counts these.' }),
    after_completion: literals(AFTER_COMPLETIONS),
    confirmation_message: Nullable(Type.String()),
    redirect_url: Nullable(Type.String()),
    fee_payer: literals(FEE_PAYERS),
    created_at: DateTime,
    updated_at: DateTime,
  }
);

const RedirectUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2000, [HTTP_URL_KEYWORD]: true });

export const CreatePaymentLinkBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    type: Type.Optional(literals(PAYMENT_LINK_TYPES)),
    price_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    currency: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
    network: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    min_amount: Type.Optional(DecimalString),
    max_amount: Type.Optional(DecimalString),
    preset_amount: Type.Optional(DecimalString),
    collect_email: Type.Optional(Type.Boolean()),
    collect_name: Type.Optional(Type.Boolean()),
    collect_phone: Type.Optional(Type.Boolean()),
    collect_address: Type.Optional(Type.Boolean()),
    max_payments: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000 })),
    after_completion: Type.Optional(literals(AFTER_COMPLETIONS)),
    confirmation_message: Type.Optional(ShortText(1000)),
    redirect_url: Type.Optional(RedirectUrl),
    fee_payer: Type.Optional(literals(FEE_PAYERS)),
  },
  { additionalProperties: false },
);
export type CreatePaymentLinkBody = Static<typeof CreatePaymentLinkBody>;

export const UpdatePaymentLinkBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    status: Type.Optional(literals(PAYMENT_LINK_STATUSES)),
    collect_email: Type.Optional(Type.Boolean()),
    collect_name: Type.Optional(Type.Boolean()),
    collect_phone: Type.Optional(Type.Boolean()),
    collect_address: Type.Optional(Type.Boolean()),
    after_completion: Type.Optional(literals(AFTER_COMPLETIONS)),
    confirmation_message: Type.Optional(ShortText(1000)),
    redirect_url: Type.Optional(RedirectUrl),
  },
  { additionalProperties: false },
);
export type UpdatePaymentLinkBody = Static<typeof UpdatePaymentLinkBody>;

export const LinkPaymentBody = Type.Object(
  {
    amount: Type.Optional(DecimalString),
    customer_email: Type.Optional(Type.String({ format: 'email', maxLength: 254 })),
  },
  { additionalProperties: false },
);
export type LinkPaymentBody = Static<typeof LinkPaymentBody>;

/** The payment page's wallet checkout of a link: the email is required, the receipt goes there. */
export const LinkCheckoutBody = Type.Object(
  {
    amount: Type.Optional(DecimalString),
    customer_email: Type.String({ format: 'email', maxLength: 254 }),
  },
  { additionalProperties: false },
);
export type LinkCheckoutBody = Static<typeof LinkCheckoutBody>;

export const LinkPayment = Type.Object({
  id: Type.String(),
  payment_link_id: Type.String(),
  amount: Type.String(),
  amount_atomic: Type.String(),
  customer_email: Nullable(Type.String()),
  tx_hash: Type.String(),
  created_at: DateTime,
});
