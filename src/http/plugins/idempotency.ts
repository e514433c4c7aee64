// Idempotency-Key on every POST of the scope it is registered in (Stripe's semantics and the IETF
// draft's): the first request's status and body are kept per (account, environment, key) for 24 h;
// a retry with the same key and the same request gets them back with `Idempotent-Replayed: true`
// and runs nothing; the same key on a different request is `400 idempotency_key_reused`; a retry
// while the first still runs is `409 idempotency_key_in_use`. 5xx responses are not kept, so a
// retry after a server error runs again. Hooks, not route code: a POST route added later is
// covered without doing anything.
//
// The window no store outside the route's own transaction closes: a process that dies after the
// route committed but before the response was stored leaves the key "in use" until its lease
// (IDEMPOTENCY_IN_FLIGHT_LEASE_MS) runs out; a retry after that runs the request again.
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { claimIdempotencyKey, completeIdempotencyKey, releaseIdempotencyKey } from '../../db/idempotency-keys.js';
import type { Scope } from '../../db/invoices.js';
import type { Pool } from '../../db/pool.js';
import {
  checkIdempotencyKey,
  IDEMPOTENCY_IN_FLIGHT_LEASE_MS,
  IDEMPOTENCY_KEY_TTL_MS,
  requestFingerprint,
} from '../../domain/idempotency.js';
import { ApiError } from '../../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Fields of the JSON response never kept for a replay (a secret shown once): the replay
     * answers the same status and object without them.
     */
    idempotencyOmit?: string[];
  }
}

/** The stored form of a JSON `{ data: {...} }` body without the route's once-only fields. */
function withoutFields(body: string, fields: string[] | undefined): string {
  if (!fields?.length) return body;
  try {
    const parsed = JSON.parse(body) as { data?: Record<string, unknown> };
    if (parsed.data && typeof parsed.data === 'object') for (const f of fields) delete parsed.data[f];
    return JSON.stringify(parsed);
  } catch {
    return body;
  }
}

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';

/**
 * Every value of a header as sent. Node joins repeated unknown headers with ", " ("a1, a2"),
 * which is also a valid single key: only the raw list tells one header from two.
 */
function headerValues(rawHeaders: string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === name) values.push(rawHeaders[i + 1]);
  return values;
}

interface Claimed {
  scope: Scope;
  key: string;
}

/**
 * Registers the hooks on `scope` (the /v1 plugin), after authentication: keys belong to the
 * account and environment of the API key. Runs before validation, so a request refused by the
 * schema is kept and replayed like any other 4xx.
 */
export const idempotencyPlugin = fp<{ pool: Pool }>(
  async (scope, deps) => {
    const claimed = new WeakMap<FastifyRequest, Claimed>();

    scope.addHook('preValidation', async (req: FastifyRequest, reply: FastifyReply) => {
      if (req.method !== 'POST') return;
      const sent = headerValues(req.raw.rawHeaders, IDEMPOTENCY_KEY_HEADER);
      if (sent.length === 0 || !req.auth) return;
      const checked = checkIdempotencyKey(sent.length === 1 ? sent[0] : sent);
      if (!checked.ok) throw new ApiError('validation_failed', checked.message, 'Idempotency-Key');
      // Every POST under /v1 is a write, and a read-only key was refused before this hook (auth.ts,
      // requireRouteAccess): it is neither handed the stored response of a full key's request (a
      // replay) nor stores its own 403 under the key.
      const owner: Scope = { accountId: req.auth.accountId, environment: req.auth.environment };
      const fingerprint = requestFingerprint(req.method, req.url.split('?')[0], req.body);
      const claim = await claimIdempotencyKey(deps.pool, owner, checked.key, fingerprint, {
        ttlMs: IDEMPOTENCY_KEY_TTL_MS,
        leaseMs: IDEMPOTENCY_IN_FLIGHT_LEASE_MS,
      });
      switch (claim.kind) {
        case 'claimed':
          claimed.set(req, { scope: owner, key: checked.key });
          return;
        case 'mismatch':
          throw new ApiError(
            'idempotency_key_reused',
            'This Idempotency-Key was used with a different request (method, path or body) in the last 24 hours; use a new key for a new request.',
            'Idempotency-Key',
          );
        case 'in_use':
          throw new ApiError(
            'idempotency_key_in_use',
            'A request with this Idempotency-Key is still being processed; retry once it has finished.',
            'Idempotency-Key',
          );
        case 'replay':
          reply.code(claim.status).header(IDEMPOTENT_REPLAYED_HEADER, 'true');
          if (claim.contentType) reply.header('content-type', claim.contentType);
          return reply.send(claim.body);
      }
    });

    scope.addHook('onSend', async (req, reply, payload) => {
      const owner = claimed.get(req);
      if (!owner) return payload;
      claimed.delete(req);
      const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : null;
      try {
        if (reply.statusCode >= 500 || body === null) {
          await releaseIdempotencyKey(deps.pool, owner.scope, owner.key);
        } else {
          const contentType = reply.getHeader('content-type');
          await completeIdempotencyKey(deps.pool, owner.scope, owner.key, {
            status: reply.statusCode,
            contentType: typeof contentType === 'string' ? contentType : null,
            body: withoutFields(body, req.routeOptions.config.idempotencyOmit),
          });
        }
      } catch (err) {
        // The request's own work is done and answered; the key stays "in use" until its lease
        // runs out, after which a retry runs again.
        req.log.error({ err }, 'could not store the idempotent response');
      }
      return payload;
    });
  },
  { name: 'idempotency' },
);
