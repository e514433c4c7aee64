// Schemas of the API key (credential) routes.
import { Type } from 'typebox';
import { DateTime, literals, NullableDateTime } from './parts.js';
import { ENVIRONMENTS, PERMISSIONS } from '../../domain/environment.js';

export const Credential = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    permission: literals(PERMISSIONS),
    environment: literals(ENVIRONMENTS),
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
    permission: Type.Optional(literals(PERMISSIONS)),
  },
  { additionalProperties: false },
);
