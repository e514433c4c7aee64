// Request and response schemas, written once with TypeBox: Fastify validates requests with them,
// serialises responses with them, and @fastify/swagger publishes them as the OpenAPI document.
import { Type, type Static, type TLiteral, type TSchema } from 'typebox';
import { HTTP_URL_KEYWORD, INSTANT_KEYWORD } from './ajv-keywords.js';
import { MAX_CUSTOMER_NAME, MAX_FOOTER, MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS, MAX_MEMO, MAX_TAX_ID } from '../domain/invoice-limits.js';
import { INVOICE_STATUSES, type InvoiceStatus } from '../domain/invoice-rules.js';

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const DateTime = Type.String({ format: 'date-time' });
const NullableDateTime = Nullable(DateTime);
/**
 * An input instant: an RFC 3339 date-time, no leap second, a UTC offset within ±15:59, and an
 * instant (offset applied) within 1970-9999 UTC, so it is stored and written back as given.
 */
const InputDateTime = Type.String({
  format: 'date-time',
  pattern: '^(?!0000)\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}:(?!60)\\d{2}(\\.\\d+)?([Zz]|[+-](0\\d|1[0-5]):?[0-5]\\d)$',
  [INSTANT_KEYWORD]: true,
});

/** Decimal strings are checked again by the money rules (precision per token); this is the shape. */
export const DecimalString = Type.String({ minLength: 1, maxLength: 40, description: 'decimal string, e.g. "12.50"' });
const ShortText = (max = 500) => Type.String({ maxLength: max });
/** The invoice statuses of the domain, in its order. */
const InvoiceStatusSchema = Type.Union(INVOICE_STATUSES.map((s) => Type.Literal(s)) as [TLiteral<InvoiceStatus>]);

// The key bounds go in propertyNames: TypeBox turns a Record's key schema into a catch-all
// patternProperties and drops its minLength/maxLength.
export const Metadata = Type.Record(Type.String(), Type.String({ maxLength: 500 }), {
  maxProperties: 50,
  propertyNames: { minLength: 1, maxLength: 40 },
  description: 'up to 50 string keys (40 chars) with string values (500 chars)',
});

/** The header every POST takes (see plugins/idempotency.ts); validated by the plugin, documented here. */
export const IdempotencyKeyHeaders = Type.Object({
  'Idempotency-Key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'Makes a retry safe: the first response is stored for 24 h and replayed (Idempotent-Replayed: true) to a retry with the same key and body',
    }),
  ),
});

export const PaymentLinkIdParams = Type.Object({ paymentLinkId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export const InvoiceIdParams = Type.Object({ invoiceId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export const ProductIdParams = Type.Object({ productId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export const SubscriptionIdParams = Type.Object({ subscriptionId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export const CredentialIdParams = Type.Object({ credentialId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      type: Type.Union([
        Type.Literal('invalid_request_error'),
        Type.Literal('authentication_error'),
        Type.Literal('permission_error'),
        Type.Literal('api_error'),
      ]),
      code: Type.Optional(Type.String()),
      message: Type.String(),
    }),
  }
);

// ---- Invoice --------------------------------------------------------------------------------

export const LineItem = Type.Object(
  {
    description: Type.String({ minLength: 1, maxLength: MAX_LINE_DESCRIPTION }),
    quantity: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    unit_amount: DecimalString,
  },
  { additionalProperties: false },
);

const Address = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' });
const AtomicAmount = Type.String({ pattern: '^(0|[1-9][0-9]*)$' });

/** How to pay what remains through the chain's ERC20FeeProxy (docs/payments.md). */
export const PaymentInstructionsSchema = Type.Object({
  chain_id: Type.Integer(),
  network: Type.String(),
  token_address: Address,
  token_decimals: Type.Integer(),
  to: Address,
  amount_atomic: AtomicAmount,
  fee_atomic: AtomicAmount,
  total_atomic: AtomicAmount,
  fee_address: Address,
  proxy_address: Address,
  payment_reference: Type.String({ pattern: '^0x[0-9a-f]{16}$' }),
});

export const Invoice = Type.Object(
  {
    id: Type.String(),
    code: Nullable(Type.String()),
    reference: Type.String(),
    status: InvoiceStatusSchema,
    amount: Nullable(Type.String()),
    amount_atomic: Nullable(Type.String()),
    fee_atomic: Nullable(Type.String()),
    currency: Type.String(),
    network: Type.String(),
    chain_id: Type.Integer(),
    period_start: NullableDateTime,
    period_end: NullableDateTime,
    attempt_count: Type.Integer(),
    next_attempt_at: NullableDateTime,
    paid_at: NullableDateTime,
    sent_at: NullableDateTime,
    reminders_enabled: Type.Boolean(),
    last_reminder_at: NullableDateTime,
    failure_code: Nullable(Type.String()),
    failure_message: Nullable(Type.String()),
    metadata: Type.Record(Type.String(), Type.String()),
    amount_paid_atomic: Type.String({ description: 'what confirmed on-chain payments applied to this invoice add up to (integer string, atomic units)' }),
    amount_remaining_atomic: Nullable(Type.String({ description: 'what remains to pay (integer string, atomic units; 0 once paid)' })),
    payment_instructions: Nullable(PaymentInstructionsSchema),
    created_at: DateTime,
    updated_at: DateTime,
  }
);
export type InvoiceObject = Static<typeof Invoice>;

export const CreateInvoiceBody = Type.Object(
  {
    customer_email: Type.String({ format: 'email', maxLength: 254 }),
    customer_name: Type.Optional(ShortText(MAX_CUSTOMER_NAME)),
    customer_time_zone: Type.Optional(Type.String({ maxLength: 64 })),
    customer_locale: Type.Optional(Type.String({ maxLength: 64 })),
    currency: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
    network: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    amount: Type.Optional(DecimalString),
    line_items: Type.Optional(Type.Array(LineItem, { maxItems: MAX_LINE_ITEMS })),
    due_at: Type.Optional(InputDateTime),
    memo: Type.Optional(ShortText(MAX_MEMO)),
    footer: Type.Optional(ShortText(MAX_FOOTER)),
    tax_id: Type.Optional(ShortText(MAX_TAX_ID)),
    metadata: Type.Optional(Metadata),
    reminders_enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type CreateInvoiceBody = Static<typeof CreateInvoiceBody>;

export const UpdateInvoiceBody = Type.Object(
  {
    amount: Type.Optional(DecimalString),
    due_at: Type.Optional(InputDateTime),
    memo: Type.Optional(ShortText(MAX_MEMO)),
    footer: Type.Optional(ShortText(MAX_FOOTER)),
    tax_id: Type.Optional(ShortText(MAX_TAX_ID)),
    line_items: Type.Optional(Type.Array(LineItem, { maxItems: MAX_LINE_ITEMS })),
    customer_locale: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);
export type UpdateInvoiceBody = Static<typeof UpdateInvoiceBody>;

export const SetRemindersBody = Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false });

export const ReminderTimeline = Type.Object({
  invoice_id: Type.String(),
  reminders_enabled: Type.Boolean(),
  status: Type.String(),
  due_at: NullableDateTime,
  time_zone: Type.String(),
  past: Type.Array(
    Type.Object({
      kind: Type.String(),
      scheduled_for: DateTime,
      status: Type.String(),
      attempt: Type.Integer(),
      sent_at: NullableDateTime,
      error: Nullable(Type.String()),
    }),
  ),
  upcoming: Type.Array(Type.Object({ kind: Type.String(), scheduled_for: DateTime })),
});

// ---- Product & Price ------------------------------------------------------------------------

export const Price = Type.Object(
  {
    id: Type.String(),
    product_id: Type.String(),
    amount: Type.String(),
    amount_atomic: Type.String(),
    currency: Type.String(),
    cadence: Type.String(),
    interval_seconds: Nullable(Type.Integer()),
    network: Type.String(),
    chain_id: Type.Integer(),
    token_address: Type.String(),
    token_decimals: Type.Integer(),
    active: Type.Boolean(),
    metadata: Type.Record(Type.String(), Type.String()),
    created_at: DateTime,
    updated_at: DateTime,
  }
);

export const Product = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    active: Type.Boolean(),
    deletable: Type.Boolean(),
    metadata: Type.Record(Type.String(), Type.String()),
    prices: Type.Array(Price),
    created_at: DateTime,
    updated_at: DateTime,
  }
);

export const CreatePriceBody = Type.Object(
  {
    amount: DecimalString,
    currency: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
    network: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    cadence: Type.Optional(Type.Union([Type.Literal('one_time'), Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('monthly'), Type.Literal('yearly'), Type.Literal('custom')])),
    interval_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 10 * 366 * 86_400 })),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type CreatePriceBody = Static<typeof CreatePriceBody>;

export const CreateProductBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    description: Type.Optional(ShortText(2000)),
    metadata: Type.Optional(Metadata),
    prices: Type.Optional(Type.Array(CreatePriceBody, { maxItems: 20 })),
  },
  { additionalProperties: false },
);
export type CreateProductBody = Static<typeof CreateProductBody>;

export const UpdateProductBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    description: Type.Optional(ShortText(2000)),
    active: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type UpdateProductBody = Static<typeof UpdateProductBody>;

// ---- Payment link ---------------------------------------------------------------------------

export const PaymentLink = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    type: Type.Union([Type.Literal('fixed_price'), Type.Literal('custom_amount')]),
    status: Type.Union([Type.Literal('active'), Type.Literal('inactive')]),
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
    payment_count: Type.Integer({ description: 'Payments the link took: simulated ones and its checkouts paid on-chain (confirmed). max_payments and the delete guard count these.' }),
    after_completion: Type.Union([Type.Literal('message'), Type.Literal('redirect')]),
    confirmation_message: Nullable(Type.String()),
    redirect_url: Nullable(Type.String()),
    fee_payer: Type.Union([Type.Literal('merchant'), Type.Literal('customer')]),
    created_at: DateTime,
    updated_at: DateTime,
  }
);

const RedirectUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2000, [HTTP_URL_KEYWORD]: true });

export const CreatePaymentLinkBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    type: Type.Optional(Type.Union([Type.Literal('fixed_price'), Type.Literal('custom_amount')])),
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
    after_completion: Type.Optional(Type.Union([Type.Literal('message'), Type.Literal('redirect')])),
    confirmation_message: Type.Optional(ShortText(1000)),
    redirect_url: Type.Optional(RedirectUrl),
    fee_payer: Type.Optional(Type.Union([Type.Literal('merchant'), Type.Literal('customer')])),
  },
  { additionalProperties: false },
);
export type CreatePaymentLinkBody = Static<typeof CreatePaymentLinkBody>;

export const UpdatePaymentLinkBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('inactive')])),
    collect_email: Type.Optional(Type.Boolean()),
    collect_name: Type.Optional(Type.Boolean()),
    collect_phone: Type.Optional(Type.Boolean()),
    collect_address: Type.Optional(Type.Boolean()),
    after_completion: Type.Optional(Type.Union([Type.Literal('message'), Type.Literal('redirect')])),
    confirmation_message: Type.Optional(ShortText(1000)),
    redirect_url: Type.Optional(RedirectUrl),
  },
  { additionalProperties: false },
);
export type UpdatePaymentLinkBody = Static<typeof UpdatePaymentLinkBody>;

export const DeletedObject = Type.Object({ id: Type.String(), deleted: Type.Boolean() });

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

// ---- Subscription ---------------------------------------------------------------------------

export const Subscription = Type.Object(
  {
    id: Type.String(),
    status: Type.String(),
    mode: Type.String(),
    amount: Type.String(),
    amount_atomic: Type.String(),
    currency: Type.String(),
    cadence: Type.String(),
    interval_seconds: Nullable(Type.Integer()),
    network: Type.String(),
    chain_id: Type.Integer(),
    contract_address: Type.String(),
    onchain_id: Type.String(),
    platform_fee_bps: Type.Integer(),
    started_at: DateTime,
    current_period_start: DateTime,
    next_charge_at: NullableDateTime,
    ends_at: NullableDateTime,
  }
);

export const StartSubscriptionBody = Type.Object(
  {
    price_id: Type.String({ minLength: 1, maxLength: 64 }),
    customer_email: Type.String({ format: 'email', maxLength: 254 }),
  },
  { additionalProperties: false },
);

// ---- Credential -----------------------------------------------------------------------------

export const Credential = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    permission: Type.Union([Type.Literal('full'), Type.Literal('read_only')]),
    environment: Type.Union([Type.Literal('sandbox'), Type.Literal('live')]),
    last4: Type.String(),
    revoked: Type.Boolean(),
    revoked_at: NullableDateTime,
    created_at: DateTime,
    secret: Type.Optional(Type.String()),
  }
);

export const CreateCredentialBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    permission: Type.Optional(Type.Union([Type.Literal('full'), Type.Literal('read_only')])),
  },
  { additionalProperties: false },
);

/** `{ data: T }` success envelope. */
export const Data = <T extends TSchema>(t: T) => Type.Object({ data: t });

// ---- Lists ----------------------------------------------------------------------------------

const CursorId = Type.String({ minLength: 1, maxLength: 64 });

/** Query of a paginated list: newest first, `limit` 1-100 (default 10), one cursor at most. */
export const PageQueryFields = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10, description: 'page size, 1-100' })),
  starting_after: Type.Optional(Type.String({ ...CursorId, description: 'id of an object: the page lists the (older) objects after it' })),
  ending_before: Type.Optional(Type.String({ ...CursorId, description: 'id of an object: the page lists the (newer) objects before it' })),
};
export const PageQuery = Type.Object(PageQueryFields, { additionalProperties: false });

export const ListInvoicesQuery = Type.Object(
  {
    ...PageQueryFields,
    status: Type.Optional(InvoiceStatusSchema),
    customer_email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'case-insensitive' })),
  },
  { additionalProperties: false },
);

/** `{ data: [T], has_more }`: one page of a list. */
export const ListOf = <T extends TSchema>(t: T) => Type.Object({ data: Type.Array(t), has_more: Type.Boolean() });

/** A line of an invoice as written, with its total (quantity x unit_amount, decimal). */
export const InvoiceLine = Type.Object({
  description: Type.String(),
  quantity: Type.Integer(),
  unit_amount: Type.String(),
  amount: Type.String({ description: 'line total: quantity x unit_amount' }),
});
