import type { Environment } from '../domain/environment.js';
import type { Queryable } from './pool.js';

/** The account and environment every merchant-owned row belongs to; each query filters by it. */
export interface Scope {
  accountId: string;
  environment: Environment;
}

/**
 * Serialises, until the transaction ends, the writers of one family of rows of a scope (a cap
 * checked by counting, a uniqueness not expressible as a constraint): a count then an insert is
 * only race-free when every writer takes this first. A transaction-level advisory lock on a hash
 * of the names; a collision only makes two scopes wait on each other. Call inside a transaction.
 */
export async function lockScopeFamily(tx: Queryable, family: string, scope: Scope): Promise<void> {
  await tx.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`${family}/${scope.accountId}/${scope.environment}`]);
}
