import { issueApiKey, revokeCredential } from '../../db/credentials.js';
import { emitEvent } from '../../db/events.js';
import { withTransaction } from '../../db/pool.js';
import { notFound } from '../../errors.js';
import type { AppDeps } from '../app.js';
import { requireWrite } from '../auth.js';
import { presentCredential } from '../presenters.js';
import { CreateCredentialBody, Credential, CredentialIdParams, Data } from '../schemas.js';
import type { Api } from '../types.js';
import { errorResponses } from './invoices.js';

export async function credentialRoutes(app: Api, deps: AppDeps): Promise<void> {
  app.post(
    '/credentials',
    {
      schema: {
        tags: ['credentials'],
        summary: 'Create an API key in the environment of the calling key; the secret is returned once',
        body: CreateCredentialBody,
        response: { 200: Data(Credential), ...errorResponses },
      },
    },
    async (req) => {
      requireWrite(req.auth);
      const { row, secret } = await issueApiKey(deps.pool, req.auth, req.body.name, req.body.permission ?? 'full');
      return { data: presentCredential(row, secret) };
    },
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
      requireWrite(req.auth);
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
