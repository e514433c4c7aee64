import { generateApiKey, hashApiKey } from '../domain/api-keys.js';
import { newId } from '../domain/ids.js';
import type { Environment, Permission } from '../domain/environment.js';
import type { Scope } from './invoices.js';
import { CREDENTIAL_SELECT, type CredentialColumns } from './credential-columns.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';
import { lockScopeFamily } from './scope.js';

export interface CredentialRow {
  id: string;
  account_id: string;
  environment: Environment;
  name: string;
  permission: Permission;
  secret_hash: Buffer;
  secret_last4: string;
  revoked_at: Date | null;
  created_at: Date;
}

const COLUMNS = 'id, account_id, environment, name, permission, secret_hash, secret_last4, revoked_at, created_at';

/**
 * The credential of a presented key (by its hash) with its account's fee and zone. Looked up on
 * every request, never cached: a revocation is seen by every process at once.
 */
export async function findCredentialForKey(db: Queryable, keyHash: Buffer): Promise<CredentialColumns | undefined> {
  // Named: prepared once per connection, not parsed and planned on every request.
  const { rows } = await db.query<CredentialColumns>({
    name: 'auth-credential',
    text: `select ${CREDENTIAL_SELECT} from credentials c join accounts a on a.id = c.account_id where c.secret_hash = $1`,
    values: [keyHash],
  });
  return rows[0];
}

/** A page of the scope's keys (revoked ones included), newest first (see page.ts). */
export async function listCredentials(db: Queryable, scope: Scope, page: PageRequest): Promise<PageResult<CredentialRow>> {
  const cols = COLUMNS.split(', ').map((c) => `c.${c}`).join(', ');
  return listPage<CredentialRow>(db, scope, { table: 'credentials', alias: 'c', select: `select ${cols} from credentials c` }, page);
}

export async function insertCredential(
  db: Queryable,
  c: { id: string; scope: Scope; name: string; permission: Permission; hash: Buffer; last4: string },
): Promise<CredentialRow> {
  const { rows } = await db.query<CredentialRow>(
    `insert into credentials (id, account_id, environment, name, permission, secret_hash, secret_last4)
     values ($1, $2, $3, $4, $5, $6, $7) returning ${COLUMNS}`,
    [c.id, c.scope.accountId, c.scope.environment, c.name, c.permission, c.hash, c.last4],
  );
  return rows[0];
}

/** Revokes once; revoking again keeps the first instant (and says it was not this call that revoked). */
export async function revokeCredential(
  db: Queryable,
  scope: Scope,
  id: string,
): Promise<(CredentialRow & { newly_revoked: boolean }) | null> {
  const { rows } = await db.query<CredentialRow & { newly_revoked: boolean }>(
    `with before as (select id, revoked_at from credentials where id = $1 and account_id = $2 and environment = $3 for update)
     update credentials c set revoked_at = coalesce(c.revoked_at, now()), updated_at = now()
     from before where c.id = before.id
     returning ${COLUMNS.split(', ').map((col) => `c.${col}`).join(', ')}, before.revoked_at is null as newly_revoked`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

/** Active (unrevoked) keys of the scope, counted under the scope's key lock (taken here; call inside a transaction). */
export async function lockCredentialsForIssue(tx: Queryable, scope: Scope): Promise<number> {
  await lockScopeFamily(tx, 'credentials', scope);
  const { rows } = await tx.query<{ n: number }>(
    'select count(*)::int as n from credentials where account_id = $1 and environment = $2 and revoked_at is null',
    [scope.accountId, scope.environment],
  );
  return rows[0].n;
}

/** Creates a key and returns its secret, the only time the secret exists outside the caller. */
export async function issueApiKey(
  db: Queryable,
  scope: Scope,
  name: string,
  permission: Permission,
): Promise<{ row: CredentialRow; secret: string }> {
  const secret = generateApiKey(scope.environment);
  const row = await insertCredential(db, { id: newId('cred'), scope, name, permission, hash: hashApiKey(secret), last4: secret.slice(-4) });
  return { row, secret };
}
