import { issueApiKey, listCredentials, lockCredentialsForIssue, revokeCredential } from '../../db/credentials.js';
import { emitEvent } from '../../db/events.js';
import { withTransaction } from '../../db/pool.js';
import { MAX_ACTIVE_API_KEYS } from '../../domain/api-keys.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { presentCredential } from '../presenters.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { CreateCredentialBody, Credential, CredentialIdParams, Data, ListOf, PageQuery } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

export async function credentialRoutes(app: Api, deps: AppDeps): Promise<void> {
  app.post(
    '/credentials',
    {
      // The secret exists once, in this response: an Idempotency-Key replay answers the same
      // credential without it (revoke it and create another if the first answer was lost).
      config: { idempotencyOmit: ['secret'] },
      schema: {
        tags: ['credentials'],
        summary: 'Create an API key in the environment of the calling key; the secret is returned once',
        body: CreateCredentialBody,
        response: { 200: Data(Credential), ...errorResponses },
      },
    },
    async (req) => {
      const { row, secret } = await withTransaction(deps.pool, async (tx) => {
        if ((await lockCredentialsForIssue(tx, req.auth)) >= MAX_ACTIVE_API_KEYS) {
          throw new ApiError(
            'api_key_limit_reached',
            `This environment already has ${MAX_ACTIVE_API_KEYS} active API keys, the most it can have; revoke one you no longer use first.`,
          );
        }
        return issueApiKey(tx, req.auth, req.body.name, req.body.permission ?? 'full');
      });
      return { data: presentCredential(row, secret) };
    },
  );

  app.get(
    '/credentials',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['credentials'],
        summary: 'List the API keys of the environment of the calling key, newest first (never their secrets)',
        querystring: PageQuery,
        response: { 200: ListOf(Credential), ...errorResponses },
      },
    },
    // presentCredential without a secret: the secret exists only in the create response.
    async (req) => listBody(await listCredentials(deps.pool, req.auth, pageRequest(req.query)), 'credential', (row) => presentCredential(row)),
  );

  app.delete(
    '/credentials/:credentialId',
    {
      schema: {
        tags: ['credentials'],
        summary: 'Revoke an API key at once (its next request gets 401 on every API process)',
        params: CredentialIdParams,
        response: { 200: Data(Credential), ...errorResponses },
      },
    },
    async (req) => {
      const credential = await withTransaction(deps.pool, async (tx) => {
        const row = await revokeCredential(tx, req.auth, req.params.credentialId);
        if (!row) throw notFound('credential', req.params.credentialId);
        const object = presentCredential(row);
        if (row.newly_revoked) await emitEvent(tx, req.auth, 'credential.revoked', 'credential', row.id, object);
        return object;
      });
      return { data: credential };
    },
  );
}
