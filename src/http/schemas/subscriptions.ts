// Schemas of the subscription routes: the Subscription object (spec 2.6 and the documented extras),
// the list's query.
import { Type } from 'typebox';
import { CANCELED_BY, SUBSCRIPTION_STATUSES } from '../../domain/subscription-statuses.js';
import { DateTime, literals, Nullable, NullableDateTime } from './parts.js';
import { PageQueryFields, PriceTerms } from './common.js';

const SubscriptionStatusSchema = literals(SUBSCRIPTION_STATUSES);

export const Subscription = Type.Object(
  {
    id: Type.String(),
    status: SubscriptionStatusSchema,
    mode: Type.String({ description: '`pull`: charged from the customer\'s wallet by the SubscriptionManager contract' }),
    ...PriceTerms,
    contract_address: Type.String(),
    onchain_id: Type.String({ description: 'the contract\'s subscription id (decimal string of a uint256)' }),
    platform_fee_bps: Type.Integer(),
    started_at: DateTime,
    current_period_start: DateTime,
    next_charge_at: NullableDateTime,
    ends_at: NullableDateTime,
    customer_id: Type.String(),
    customer_email: Type.String(),
    price_id: Type.String(),
    subscriber_address: Nullable(Type.String({ description: 'the wallet that subscribed (and is charged)' })),
    canceled_at: NullableDateTime,
    canceled_by: Nullable(literals(CANCELED_BY, { description: 'who canceled: the customer on-chain, the merchant over the API, or dunning after the last failed attempt' })),
  }
);

export const ListSubscriptionsQuery = Type.Object(
  {
    ...PageQueryFields,
    status: Type.Optional(SubscriptionStatusSchema),
    customer_email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'case-insensitive' })),
  },
  { additionalProperties: false },
);
