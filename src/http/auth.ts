// Authentication: the key decides the account, the environment and the permission. Looked up in
// Postgres on every request (no cache), so a revoked key fails on its very next request on every
// API process. Hot read routes look the key up in the same statement as their data (one round
// trip, see db/credential-columns.ts), and apply the same checks through authorize().
import type { FastifyRequest } from 'fastify';
import { hashApiKey, hashesEqual, isWellFormedKey } from '../domain/api-keys.js';
import { environmentOfKey, type Environment, type Permission } from '../domain/environment.js';
import type { CredentialColumns } from '../db/credential-columns.js';
import { findCredentialForKey } from '../db/credentials.js';
import type { Queryable } from '../db/pool.js';
import { ApiError } from '../errors.js';

export interface AuthContext {
  credentialId: string;
  accountId: string;
  environment: Environment;
  permission: Permission;
  platformFeeBps: number;
  accountTimeZone: string;
}

/** A well-formed key as presented, not yet checked against the database. */
export interface PresentedKey {
  hash: Buffer;
  environment: Environment;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext;
    presentedKey: PresentedKey;
  }
  interface FastifyContextConfig {
    /** 'in-query': the route authenticates inside its own query (one round trip). */
    auth?: 'in-query';
    /** Set for the v1 routes without a body schema (app.ts): a body with a field is a 400. */
    takesNoBody?: boolean;
    /** A test helper: sandbox keys only (403 live_mode_forbidden). */
    sandboxOnly?: boolean;
    /** Full-access keys only, reads included (webhook endpoints: their secrets, their URLs). */
    fullAccessOnly?: boolean;
  }
}

// The rate limiter and authentication both need the presented key: read and hash it once.
const presented = new WeakMap<FastifyRequest, PresentedKey | ApiError>();

/** The request's well-formed key, hashed; throws the 401 for a missing or malformed one. */
export function presentKey(req: FastifyRequest): PresentedKey {
  let result = presented.get(req);
  if (result === undefined) {
    try {
      result = readKey(req);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      result = err;
    }
    presented.set(req, result);
  }
  if (result instanceof ApiError) throw result;
  return result;
}

function readKey(req: FastifyRequest): PresentedKey {
  // An empty Api-Key is no key: X-API-Key, also accepted (spec), is read then.
  const given = (raw: string | string[] | undefined) => (Array.isArray(raw) ? raw[0] : raw)?.trim() || undefined;
  const key = given(req.headers['api-key']) ?? given(req.headers['x-api-key']);
  if (!key) {
    throw new ApiError('api_key_missing', 'No API key provided. Send your key in the Api-Key header.');
  }
  const environment = environmentOfKey(key);
  if (!environment || !isWellFormedKey(key)) {
    throw new ApiError('api_key_invalid', 'Invalid API key provided.');
  }
  return { hash: hashApiKey(key), environment };
}

/** The checks every request passes: the key exists, matches, is of its prefix's environment, is not revoked. */
export function authorize(key: PresentedKey, row: CredentialColumns | undefined): AuthContext {
  if (!row || !row.cred_id || !row.cred_secret_hash || !hashesEqual(row.cred_secret_hash, key.hash) || row.cred_environment !== key.environment) {
    throw new ApiError('api_key_invalid', 'Invalid API key provided.');
  }
  if (row.cred_revoked_at) {
    throw new ApiError('api_key_revoked', 'This API key was revoked.');
  }
  return {
    credentialId: row.cred_id,
    accountId: row.cred_account_id!,
    environment: row.cred_environment,
    permission: row.cred_permission!,
    platformFeeBps: row.cred_fee_bps!,
    accountTimeZone: row.cred_time_zone!,
  };
}

export async function authenticate(db: Queryable, req: FastifyRequest): Promise<AuthContext> {
  const key = presentKey(req);
  return authorize(key, await findCredentialForKey(db, key.hash));
}

/** What a read-only key may do: read. Any other method is a write, whatever a future route uses. */
const READS = new Set(['GET', 'HEAD']);

/**
 * What a key may do on a route, decided once authenticated and before the request is read: a live
 * key on a test helper is 403 `live_mode_forbidden`, a read-only key on any write (or on a
 * full-access-only route) 403 `permission_denied`. Before the body and its validation, so a
 * malformed request gets the 403 a well-formed one gets.
 */
export function requireRouteAccess(auth: AuthContext, method: string, config: { sandboxOnly?: boolean; fullAccessOnly?: boolean }): void {
  if (config.sandboxOnly && auth.environment !== 'sandbox') {
    throw new ApiError('live_mode_forbidden', 'Test helpers exist in the sandbox only; use a sandbox key.');
  }
  if (auth.permission === 'full') return;
  if (config.fullAccessOnly) throw new ApiError('permission_denied', 'Webhook endpoints need a full-access key.');
  if (!READS.has(method)) throw new ApiError('permission_denied', 'This API key is read-only; a full-access key is required for this request.');
}
