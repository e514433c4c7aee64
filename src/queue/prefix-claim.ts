// One Redis prefix, one database. Two deployments (staging and production, two checkouts) on one
// Redis under the same REDIS_PREFIX would consume each other's jobs and remove each other's
// reminder schedulers. So every process claims the prefix for its database at start: a marker
// key under the prefix names the database's identity; a process of another database finding the
// marker refuses to start.
import type { RedisClient } from './redis.js';
import type { DeploymentIdentity } from '../db/deployment.js';

export interface PrefixOwner {
  database_id: string;
  database: string;
  claimed_at: string;
}

/**
 * `<prefix>:deployment`. No hash tag: the claim only issues single-key commands (SET NX, GET),
 * which a Redis Cluster serves on any slot, and deployments that claimed the prefix before the
 * cluster support keep their marker.
 */
export function prefixClaimKey(prefix: string): string {
  return `${prefix}:deployment`;
}

export type ClaimResult = { ok: true; claimedNow: boolean } | { ok: false; owner: PrefixOwner };

/** Claims the prefix for this database, or reports the database that holds it. */
export async function claimPrefix(redis: RedisClient, prefix: string, self: DeploymentIdentity): Promise<ClaimResult> {
  const key = prefixClaimKey(prefix);
  const mine: PrefixOwner = { database_id: self.id, database: self.database, claimed_at: new Date().toISOString() };
  const set = await redis.set(key, JSON.stringify(mine), 'NX');
  if (set === 'OK') return { ok: true, claimedNow: true };
  const raw = await redis.get(key);
  if (raw === null) return claimPrefix(redis, prefix, self); // deleted between the two calls
  let owner: PrefixOwner;
  try {
    owner = JSON.parse(raw) as PrefixOwner;
  } catch {
    owner = { database_id: raw, database: 'unknown', claimed_at: 'unknown' };
  }
  return owner.database_id === self.id ? { ok: true, claimedNow: false } : { ok: false, owner };
}

export function claimConflictMessage(prefix: string, self: DeploymentIdentity, owner: PrefixOwner): string {
  return (
    `prefix "${prefix}" is claimed by another database (${owner.database_id}, ${owner.database}, since ${owner.claimed_at}); ` +
    `this database is ${self.id} (${self.database}). Give each deployment its own REDIS_PREFIX`
  );
}
