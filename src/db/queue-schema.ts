// BullMQ's Postgres backend keeps its jobs in a schema of the service's own database. This module
// migrates it (BullMQ's own migrations), claims it for this database, and holds the service's
// only reads of BullMQ's tables: the reconciler's bulk reads (one statement each instead of one
// BullMQ call per invoice). They depend on BullMQ's table layout (`scheduler`, `job`, both keyed
// by queue), as the Redis side depends on its key layout; the tests run them against the real one.
import pg from 'pg';
import { runMigrations } from 'bullmq';
import type { Queryable } from './pool.js';

export const QUEUE_SCHEMA = 'bullmq';
const CLAIM_PREFIX = 'invoice-lifecycle queues of database ';

/** A pool whose connections resolve BullMQ's unqualified table names in its schema. */
export function createQueueSchemaPool(databaseUrl: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, idleTimeoutMillis: 10_000, options: `-c search_path=${QUEUE_SCHEMA}` });
  // An idle client that loses its server emits 'error' on the pool; the next query reports it.
  pool.on('error', () => undefined);
  return pool;
}

/** Applies BullMQ's pending schema migrations (its own advisory lock: safe with several processes). */
export async function migrateQueueSchema(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await runMigrations(client, QUEUE_SCHEMA);
  } finally {
    await client.end();
  }
}

export class QueueSchemaClaimError extends Error {}

/**
 * One `bullmq` schema belongs to one deployment: the database it was created in. The claim is a
 * comment on the schema naming that database (name and oid). A schema that arrived with a dump or
 * a database copy still names its original: starting on it would run the other deployment's
 * pending jobs, so the process refuses (the caller exits 1 naming QUEUE_BACKEND).
 */
export async function claimQueueSchema(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ me: string; claim: string | null; present: boolean }>(
      `select current_database() || ' (oid ' || d.oid || ')' as me,
              obj_description(n.oid, 'pg_namespace') as claim,
              n.oid is not null as present
         from pg_database d
         left join pg_namespace n on n.nspname = $1
        where d.datname = current_database()`,
      [QUEUE_SCHEMA],
    );
    const { me, claim, present } = rows[0];
    if (!present) throw new QueueSchemaClaimError(`schema ${QUEUE_SCHEMA} is missing: run the migrations first`);
    const mine = `${CLAIM_PREFIX}${me}`;
    if (claim === mine) return;
    if (claim !== null && claim.startsWith(CLAIM_PREFIX)) {
      throw new QueueSchemaClaimError(
        `schema ${QUEUE_SCHEMA} belongs to ${claim.slice(CLAIM_PREFIX.length)}, not ${me}: a copy of another deployment's queues. ` +
          `Drop it (DROP SCHEMA ${QUEUE_SCHEMA} CASCADE; reminders are rebuilt from Postgres) or, if this is the same deployment restored, release it (COMMENT ON SCHEMA ${QUEUE_SCHEMA} IS NULL)`,
      );
    }
    await client.query(`comment on schema ${pg.escapeIdentifier(QUEUE_SCHEMA)} is ${pg.escapeLiteral(mine)}`);
  } finally {
    await client.end();
  }
}

/** Readiness: BullMQ's schema answers (and exists). */
export async function pingQueueSchema(db: Queryable): Promise<void> {
  await db.query(`select 1 from ${QUEUE_SCHEMA}.meta limit 1`);
}

/** Every job scheduler id of a queue. */
export async function queueSchedulerIds(db: Queryable, queue: string): Promise<string[]> {
  const { rows } = await db.query<{ scheduler_id: string }>(`select scheduler_id from ${QUEUE_SCHEMA}.scheduler where queue = $1`, [queue]);
  return rows.map((r) => r.scheduler_id);
}

/** Which of these job ids exist in a queue, whatever their state. */
export async function existingQueueJobIds(db: Queryable, queue: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>(`select id from ${QUEUE_SCHEMA}.job where queue = $1 and id = any($2::text[])`, [queue, ids]);
  return new Set(rows.map((r) => r.id));
}

// The service's markers live in BullMQ's per-queue `meta` table under a field of their own
// (`invoice-lifecycle:<name>`), as on Redis they live under the queue's keys: lost with the queue.
const markerField = (name: string) => `invoice-lifecycle:${name}`;

export async function readQueueMarker(db: Queryable, queue: string, name: string): Promise<string | null> {
  const { rows } = await db.query<{ value: string | null }>(`select value from ${QUEUE_SCHEMA}.meta where queue = $1 and field = $2`, [queue, markerField(name)]);
  return rows[0]?.value ?? null;
}

export async function writeQueueMarker(db: Queryable, queue: string, name: string, value: string): Promise<void> {
  await db.query(
    `insert into ${QUEUE_SCHEMA}.meta (queue, field, value) values ($1, $2, $3) on conflict (queue, field) do update set value = excluded.value`,
    [queue, markerField(name), value],
  );
}

/**
 * Removes these job schedulers of a queue and each one's pending delayed job, in one statement and
 * one commit, through BullMQ's own `remove_job_scheduler` (the function its removeJobScheduler
 * calls once per scheduler, so the same rows go and the same `removed` events are written).
 * Ids are taken in sorted order, so two such calls lock the rows in the same order.
 */
export async function removeQueueJobSchedulers(db: Queryable, queue: string, schedulerIds: string[]): Promise<void> {
  if (schedulerIds.length === 0) return;
  await db.query(
    `select ${QUEUE_SCHEMA}.remove_job_scheduler($1, s.id) from (select distinct unnest($2::text[]) as id order by 1) s`,
    [queue, schedulerIds],
  );
}
