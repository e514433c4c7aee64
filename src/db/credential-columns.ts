// The credential columns an authenticating query selects: the key lookup of every request, and
// the hot reads that look the key up in the same statement as their data (one round trip). The
// http layer checks them with authorize().
import type { Environment, Permission } from '../domain/environment.js';

/** The credential columns a query selects (as these names) for authorize(). */
export interface CredentialColumns {
  cred_id: string | null;
  cred_account_id: string | null;
  cred_environment: Environment | null;
  cred_permission: Permission | null;
  cred_secret_hash: Buffer | null;
  cred_revoked_at: Date | null;
  cred_fee_bps: number | null;
  cred_time_zone: string | null;
}

/** SQL select list over `credentials c join accounts a`, matching CredentialColumns. */
export const CREDENTIAL_SELECT = `c.id as cred_id, c.account_id as cred_account_id, c.environment as cred_environment,
  c.permission as cred_permission, c.secret_hash as cred_secret_hash, c.revoked_at as cred_revoked_at,
  a.platform_fee_bps as cred_fee_bps, a.time_zone as cred_time_zone`;
