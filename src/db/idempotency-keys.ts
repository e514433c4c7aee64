// SQL of the Idempotency-Key store (see the migration idempotency-keys).
import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';

export type Claim =
  | { kind: 'claimed' }
  | { kind: 'replay'; status: number; contentType: string | null; body: string }
  | { kind: 'in_use' }
  | { kind: 'mismatch' };

interface StoredKey {
  fingerprint: Buffer;
  response_status: number | null;
  response_content_type: string | null;
  response_body: string | null;
}

/**
 * Claims `key` for a request with this fingerprint, or says what to answer instead. A key is
 * claimed when it is new, older than `ttlMs` (expired, not yet pruned), or held by a request with
 * the same fingerprint whose lease ran out (its process died before answering).
 */
export async function claimIdempotencyKey(
  db: Queryable,
  scope: Scope,
  key: string,
  fingerprint: Buffer,
  opts: { ttlMs: number; leaseMs: number },
): Promise<Claim> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const claimed = await db.query(
      `insert into idempotency_keys (account_id, environment, key, fingerprint, locked_until, created_at)
       values ($1, $2, $3, $4, clock_timestamp() + make_interval(secs => $6 / 1000.0), clock_timestamp())
       on conflict (account_id, environment, key) do update
         set fingerprint = excluded.fingerprint, locked_until = excluded.locked_until, created_at = excluded.created_at,
             response_status = null, response_content_type = null, response_body = null
         where idempotency_keys.created_at < clock_timestamp() - make_interval(secs => $5 / 1000.0)
            or (idempotency_keys.response_status is null and idempotency_keys.locked_until < clock_timestamp()
                and idempotency_keys.fingerprint = excluded.fingerprint)
       returning 1`,
      [scope.accountId, scope.environment, key, fingerprint, opts.ttlMs, opts.leaseMs],
    );
    if (claimed.rowCount === 1) return { kind: 'claimed' };
    const { rows } = await db.query<StoredKey>(
      `select fingerprint, response_status, response_content_type, response_body from idempotency_keys
       where account_id = $1 and environment = $2 and key = $3`,
      [scope.accountId, scope.environment, key],
    );
    const row = rows[0];
    if (!row) continue; // pruned between the two statements: claim again
    if (!row.fingerprint.equals(fingerprint)) return { kind: 'mismatch' };
    if (row.response_status === null) return { kind: 'in_use' };
    return { kind: 'replay', status: row.response_status, contentType: row.response_content_type, body: row.response_body ?? '' };
  }
  return { kind: 'in_use' };
}

/** Stores the response of the request that claimed the key. */
export async function completeIdempotencyKey(
  db: Queryable,
  scope: Scope,
  key: string,
  response: { status: number; contentType: string | null; body: string },
): Promise<void> {
  await db.query(
    `update idempotency_keys set response_status = $4, response_content_type = $5, response_body = $6, locked_until = null
     where account_id = $1 and environment = $2 and key = $3 and response_status is null`,
    [scope.accountId, scope.environment, key, response.status, response.contentType, response.body],
  );
}

/** Frees a claimed key without a stored response (a 5xx): a retry runs the request again. */
export async function releaseIdempotencyKey(db: Queryable, scope: Scope, key: string): Promise<void> {
  await db.query(
    'delete from idempotency_keys where account_id = $1 and environment = $2 and key = $3 and response_status is null',
    [scope.accountId, scope.environment, key],
  );
}

/** Deletes keys older than `ttlMs`, in batches so no statement holds many row locks; returns the count. */
export async function pruneIdempotencyKeys(db: Queryable, ttlMs: number, batch = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `delete from idempotency_keys where ctid in (
         select ctid from idempotency_keys where created_at < clock_timestamp() - make_interval(secs => $1 / 1000.0) limit $2)`,
      [ttlMs, batch],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) return total;
  }
}
