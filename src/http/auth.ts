// Authentication: the key decides the account, the environment and the permission. Looked up in
// Postgres on every request (no cache), so a revoked key fails on its very next request on every
// API process.
import type { FastifyRequest } from 'fastify';
import { hashApiKey, hashesEqual, isWellFormedKey } from '../domain/api-keys.js';
import { environmentOfKey, type Environment, type Permission } from '../domain/environment.js';
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

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext;
  }
}

function presentedKey(req: FastifyRequest): string | null {
  const raw = req.headers['api-key'] ?? req.headers['x-api-key'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  return value ? value.trim() : null;
}

interface Row {
  id: string;
  account_id: string;
  environment: Environment;
  permission: Permission;
  secret_hash: Buffer;
  revoked_at: Date | null;
  platform_fee_bps: number;
  time_zone: string;
}

export async function authenticate(db: Queryable, req: FastifyRequest): Promise<AuthContext> {
  const key = presentedKey(req);
  if (!key) {
    throw new ApiError('api_key_missing', 'No API key provided. Send your key in the Api-Key header.');
  }
  const environment = environmentOfKey(key);
  if (!environment || !isWellFormedKey(key)) {
    throw new ApiError('api_key_invalid', 'Invalid API key provided.');
  }
  const hash = hashApiKey(key);
  const { rows } = await db.query<Row>(
    `select c.id, c.account_id, c.environment, c.permission, c.secret_hash, c.revoked_at, a.platform_fee_bps, a.time_zone
     from credentials c join accounts a on a.id = c.account_id where c.secret_hash = $1`,
    [hash],
  );
  const row = rows[0];
  if (!row || !hashesEqual(row.secret_hash, hash) || row.environment !== environment) {
    throw new ApiError('api_key_invalid', 'Invalid API key provided.');
  }
  if (row.revoked_at) {
    throw new ApiError('api_key_revoked', 'This API key was revoked.');
  }
  return {
    credentialId: row.id,
    accountId: row.account_id,
    environment: row.environment,
    permission: row.permission,
    platformFeeBps: row.platform_fee_bps,
    accountTimeZone: row.time_zone,
  };
}

/** Writes need a full-access key. */
export function requireWrite(auth: AuthContext): void {
  if (auth.permission !== 'full') {
    throw new ApiError('permission_denied', 'This API key is read-only; a full-access key is required for this request.');
  }
}
