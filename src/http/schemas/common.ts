// The request and response parts every resource shares: decimal strings, input instants,
// metadata, path ids, the error envelope, the data and list envelopes, the list query.
import { type TSchema, Type } from 'typebox';
import { INSTANT_KEYWORD } from '../ajv-keywords.js';
import { MAX_METADATA_KEY, MAX_METADATA_KEYS, MAX_METADATA_VALUE } from '../../domain/invoice-limits.js';
import { Nullable } from './parts.js';

/**
 * An input instant: an RFC 3339 date-time, no leap second, a UTC offset within ±15:59, and an
 * instant (offset applied) within 1970-9999 UTC, so it is stored and written back as given.
 */
export const InputDateTime = Type.String({
  format: 'date-time',
  pattern: '^(?!0000)\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}:(?!60)\\d{2}(\\.\\d+)?([Zz]|[+-](0\\d|1[0-5]):?[0-5]\\d)$',
  [INSTANT_KEYWORD]: true,
});

/** Decimal strings are checked again by the money rules (precision per token); this is the shape. */
export const DecimalString = Type.String({ minLength: 1, maxLength: 40, description: 'decimal string, e.g. "12.50"' });
export const ShortText = (max = 500) => Type.String({ maxLength: max });

// The key bounds go in propertyNames: TypeBox turns a Record's key schema into a catch-all
// patternProperties and drops its minLength/maxLength.
export const Metadata = Type.Record(Type.String(), Type.String({ maxLength: MAX_METADATA_VALUE }), {
  maxProperties: MAX_METADATA_KEYS,
  propertyNames: { minLength: 1, maxLength: MAX_METADATA_KEY },
  description: `up to ${MAX_METADATA_KEYS} string keys (${MAX_METADATA_KEY} chars) with string values (${MAX_METADATA_VALUE} chars)`,
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

/** `{ data: [T], has_more }`: one page of a list. */
export const ListOf = <T extends TSchema>(t: T) => Type.Object({ data: Type.Array(t), has_more: Type.Boolean() });

export const DeletedObject = Type.Object({ id: Type.String(), deleted: Type.Boolean() });

/** What a price charges and on which chain: the same fields on a price and on a subscription to it. */
export const PriceTerms = {
  amount: Type.String(),
  amount_atomic: Type.String(),
  currency: Type.String(),
  cadence: Type.String(),
  interval_seconds: Nullable(Type.Integer()),
  network: Type.String(),
  chain_id: Type.Integer(),
};
