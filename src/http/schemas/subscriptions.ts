// Schemas of the subscription routes.
import { Type } from 'typebox';
import { DateTime, Nullable, NullableDateTime } from './parts.js';

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
