import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runner } from 'node-pg-migrate';
import { migrateQueueSchema } from './queue-schema.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations', import.meta.url));

/** Creates the database named by the URL when it does not exist yet (the default URL's `invoices`). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const target = new URL(databaseUrl);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!name) return;
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) {
      await client.query(`create database ${pg.escapeIdentifier(name)}`).catch((err: { code?: string }) => {
        // 42P04: another process created it between our check and our create.
        if (err.code !== '42P04') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * Applies pending SQL migrations under node-pg-migrate's advisory lock (safe with several
 * processes), and, for the Postgres queue backend, BullMQ's own schema (`bullmq`).
 */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => undefined, opts: { queueSchema?: boolean } = {}): Promise<void> {
  await ensureDatabase(databaseUrl);
  await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    advisoryLockMode: 'wait',
    log,
  });
  if (opts.queueSchema) log(`queue schema at version ${await migrateQueueSchema(databaseUrl)}`);
}
