// Schemas of the subscription routes.
import { Type } from 'typebox';
import { DateTime, NullableDateTime } from './parts.js';
import { PriceTerms } from './common.js';

export const Subscription = Type.Object(
  {
    id: Type.String(),
    status: Type.String(),
    mode: Type.String(),
    ...PriceTerms,
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
