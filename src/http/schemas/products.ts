// Schemas of the product and price routes.
import { type Static, Type } from 'typebox';
import { DateTime, literals, Nullable } from './parts.js';
import { CADENCES } from '../../domain/cadence.js';
import { DecimalString, Metadata, PriceTerms, ShortText } from './common.js';

export const Price = Type.Object(
  {
    id: Type.String(),
    product_id: Type.String(),
    ...PriceTerms,
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
    cadence: Type.Optional(literals(CADENCES)),
    interval_seconds: Type.Optional(Type.Integer({ minimum: 10, maximum: 10 * 366 * 86_400, description: 'custom cadence: at least 10 in the sandbox, 3600 in live' })),
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
