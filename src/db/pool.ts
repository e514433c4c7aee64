import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that runs a query: the pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// numeric and int8 come back as strings (pg's default): money stays exact, never a JS float.
// timestamptz comes back as Date.

export function createPool(databaseUrl: string, max = 20): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, connectionTimeoutMillis: 5_000 });
  // An idle client that loses its server emits 'error' on the pool; without a listener that
  // would crash the process. The next query reports the failure instead.
  pool.on('error', () => undefined);
  return pool;
}

/** Runs fn inside BEGIN/COMMIT, rolling back on any throw. */
export function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return inTransaction(pool, 'begin', fn);
}

/**
 * Reads that must agree with each other (an invoice's balance and its payments): one read-only
 * snapshot, so no commit lands between them.
 */
export function withSnapshot<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return inTransaction(pool, 'begin isolation level repeatable read read only', fn);
}

async function inTransaction<T>(pool: pg.Pool, begin: string, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(pool, async (client, session) => {
    try {
      await client.query(begin);
      const result = await fn(client);
      await client.query('commit');
      return result;
    } catch (err) {
      // A session the server ended took its transaction with it.
      if (!session.broken()) await client.query('rollback').catch(() => undefined);
      throw err;
    }
  });
}

/** What a held client's holder can tell of its session and do about it. */
export interface HeldSession {
  /** The server ended the session while it was held. */
  broken(): boolean;
  /** The session cannot be trusted (a lock it may still hold): closed at release, not pooled. */
  discard(err: Error): void;
}

/**
 * Runs fn on a client held for its whole run. A held client has no pool listener, and fn may wait
 * between its queries (on a node, a lock): a session the server ends then (a failover,
 * pg_terminate_backend) emits 'error', which without a listener is an uncaught exception that
 * kills the process. fn's next query fails instead, and the client is closed, not pooled.
 */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient, session: HeldSession) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  const session: HeldSession = {
    broken: () => broken !== undefined,
    discard: (err) => {
      broken ??= err;
    },
  };
  try {
    return await fn(client, session);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

/** A round trip to the server, for readiness checks. */
export async function pingDatabase(db: Queryable): Promise<void> {
  await db.query('select 1');
}

/** Whether a server at this URL accepts a connection now (a server being started answers false). */
export async function acceptsConnections(url: string, timeoutMs = 1_000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}
