// Runs once per `npm test`: starts (or names) Postgres and Redis (services.ts: the variables, else
// containers), migrates a template database that every
// test file clones into a database of its own, and drops everything of this run at the end.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../src/db/migrate.js';
import { planServices, ServicesUnavailable, startServices } from './services.js';
import { redactUrl } from '../../src/log.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
    /** Null when no Redis could be had: the Redis-backend projects are then left out. */
    redisUrl: string | null;
    /** Which queue backend this project's files run on (see vitest.config.ts). */
    queueBackend: 'redis' | 'postgres';
    /** REDIS_CLUSTER_NODES of the local cluster in the cluster project (cluster-setup.ts), else null. */
    redisClusterNodes: string | null;
    /** 'cluster' in the cluster test project (queue backend redis, on the local cluster). */
    redisMode: 'single' | 'cluster' | undefined;
    templateDatabase: string;
    runId: string;
  }
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export default async function setup(project: TestProject) {
  // vitest.config.ts made the same plan already, and stopped the run with one line if impossible.
  const services = await startServices(await planServices()).catch((error: unknown) => {
    // A container that cannot start (an image neither present nor pullable): its one line, exit 1.
    if (!(error instanceof ServicesUnavailable)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
  // The one line that says what this run talks to (passwords masked).
  process.stdout.write(
    `tests use Postgres ${redactUrl(services.databaseUrl)} (${services.origin.database}) and ${services.redisUrl ? `Redis ${redactUrl(services.redisUrl)} (${services.origin.redis})` : `no Redis (the Redis-backend project is left out: ${services.origin.redis})`}\n`,
  );
  const runId = randomBytes(4).toString('hex');
  const template = `inv_test_${runId}_template`;
  // The Postgres queue backend's schema too: every file's database then has it, unclaimed.
  try {
    await migrate(withDatabase(services.databaseUrl, template), undefined, { queueSchema: true });
  } catch (error) {
    await services.stop(); // no container left behind by a failed start
    throw error;
  }
  project.provide('databaseUrl', services.databaseUrl);
  project.provide('redisUrl', services.redisUrl);
  // The cluster project starts its cluster in its own global setup (cluster-setup.ts), when one of
  // its files runs; every other project has none.
  project.provide('redisClusterNodes', null);
  project.provide('templateDatabase', template);
  project.provide('runId', runId);

  return async () => {
    try {
      await dropRunDatabases(services.databaseUrl, runId);
    } finally {
      await services.stop();
    }
  };
}

/** This run's databases, on a server that outlives the run (TEST_DATABASE_URL). */
async function dropRunDatabases(databaseUrl: string, runId: string): Promise<void> {
  const admin = new pg.Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>('select datname from pg_database where datname like $1', [`inv_test_${runId}_%`]);
    for (const { datname } of rows) {
      await admin.query(`drop database if exists ${pg.escapeIdentifier(datname)} with (force)`);
    }
  } finally {
    await admin.end();
  }
}
