// Schemas of the invoice routes: the Invoice object, create and update bodies, reminders, lists.
import { type Static, Type } from 'typebox';
import { Address, AtomicAmount, DateTime, literals, Nullable, NullableDateTime } from './parts.js';
import { MAX_CUSTOMER_NAME, MAX_FOOTER, MAX_LINE_DESCRIPTION, MAX_LINE_ITEMS, MAX_MEMO, MAX_TAX_ID } from '../../domain/invoice-limits.js';
import { INVOICE_STATUSES } from '../../domain/invoice-rules.js';
import { DecimalString, InputDateTime, Metadata, PageQueryFields, ShortText } from './common.js';

/** The invoice statuses of the domain, in its order. */
const InvoiceStatusSchema = literals(INVOICE_STATUSES);

export const LineItem = Type.Object(
  {
    description: Type.String({ minLength: 1, maxLength: MAX_LINE_DESCRIPTION }),
    quantity: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    unit_amount: DecimalString,
  },
  { additionalProperties: false },
);


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

export const ListInvoicesQuery = Type.Object(
  {
    ...PageQueryFields,
    status: Type.Optional(InvoiceStatusSchema),
    customer_email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'case-insensitive' })),
  },
  { additionalProperties: false },
);

/** A line of an invoice as written, with its total (quantity x unit_amount, decimal). */
export const InvoiceLine = Type.Object({
  description: Type.String(),
  quantity: Type.Integer(),
  unit_amount: Type.String(),
  amount: Type.String({ description: 'line total: quantity x unit_amount' }),
});
