// Schemas of the events and webhook endpoint routes (see index.ts for the conventions).
import { Type, type Static } from 'typebox';
import { EVENT_TYPES } from '../../domain/events.js';
import { ENVIRONMENTS } from '../../domain/environment.js';
import { DateTime, literals, Nullable, NullableDateTime } from './parts.js';
import { PageQueryFields } from './common.js';

const EventTypeName = Type.String({ description: `one of: ${EVENT_TYPES.join(', ')}` });

export const Event = Type.Object({
  id: Type.String(),
  type: EventTypeName,
  created_at: DateTime,
  environment: literals(ENVIRONMENTS),
  data: Type.Object({
    object: Type.Object({}, { additionalProperties: true, description: 'the object as the API presents it at the time of the event' }),
  }),
});
export type EventObject = Static<typeof Event>;

export const ListEventsQuery = Type.Object(
  { ...PageQueryFields, type: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'only events of this type' })) },
  { additionalProperties: false },
);

/** Deliveries page forwards only: `limit` and `starting_after`. */
export const DeliveriesQuery = Type.Object(
  { limit: PageQueryFields.limit, starting_after: PageQueryFields.starting_after },
  { additionalProperties: false },
);

export const EventIdParams = Type.Object({ eventId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export const EndpointIdParams = Type.Object({ endpointId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

const EnabledEvents = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  minItems: 1,
  maxItems: 64,
  description: 'event types, or ["*"] for every type',
});
const Url = Type.String({ minLength: 1, maxLength: 2048 });

export const WebhookEndpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled_events: Type.Array(Type.String()),
  status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  environment: literals(ENVIRONMENTS),
  previous_secret_expires_at: NullableDateTime,
  created_at: DateTime,
  updated_at: DateTime,
  secret: Type.Optional(Type.String({ description: 'the signing secret: returned by create and rotate_secret only' })),
});

export const CreateWebhookEndpointBody = Type.Object(
  { url: Url, enabled_events: EnabledEvents, description: Type.Optional(Type.String({ maxLength: 500 })) },
  { additionalProperties: false },
);
export type CreateWebhookEndpointBody = Static<typeof CreateWebhookEndpointBody>;

export const UpdateWebhookEndpointBody = Type.Object(
  {
    url: Type.Optional(Url),
    enabled_events: Type.Optional(EnabledEvents),
    description: Type.Optional(Type.String({ maxLength: 500 })),
    status: Type.Optional(Type.Union([Type.Literal('enabled'), Type.Literal('disabled')])),
  },
  { additionalProperties: false },
);

export const WebhookDelivery = Type.Object({
  id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  endpoint_id: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
  attempt_count: Type.Integer(),
  last_status_code: Type.Union([Type.Integer(), Type.Null()]),
  last_error: Nullable(Type.String()),
  last_duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  next_retry_at: NullableDateTime,
  succeeded_at: NullableDateTime,
  created_at: DateTime,
  attempts: Type.Array(
    Type.Object({
      attempt: Type.Integer(),
      started_at: DateTime,
      status_code: Type.Union([Type.Integer(), Type.Null()]),
      duration_ms: Type.Integer(),
      error: Nullable(Type.String()),
    }),
  ),
});

export const DeletedEndpoint = Type.Object({ id: Type.String(), deleted: Type.Boolean() });
