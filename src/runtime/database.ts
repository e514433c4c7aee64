// Which PostgreSQL a command uses: DATABASE_URL, or with it unset an embedded one (see
// embedded-postgres.ts). Called by every entrypoint before it loads its configuration.
import { embeddedPostgresDirOf, loadConfigOrExit } from '../config.js';
import { createLogger, prettyLogs } from '../log.js';
import { EmbeddedPostgresError, useEmbeddedPostgres } from './embedded-postgres.js';

export interface DatabaseChoice {
  /** The environment to load the configuration from, DATABASE_URL set. */
  env: NodeJS.ProcessEnv;
  /** How a person connects to it with psql, without printing a password. */
  psql: string;
  /** Stops the embedded server when this process runs it (after the drain); a no-op otherwise. */
  stop(): Promise<void>;
}

/**
 * `own` for `npm start` (a second one on the same folder refuses), `share` for the other commands
 * (they use the running server, or run one for their own lifetime). A failure prints one line and
 * exits 1.
 */
export async function chooseDatabaseOrExit(env: NodeJS.ProcessEnv, mode: 'own' | 'share'): Promise<DatabaseChoice> {
  const dir = embeddedPostgresDirOf(env);
  if (dir === null) return { env, psql: 'psql "$DATABASE_URL"', stop: async () => undefined };
  // Every other variable is checked before a server is started for nothing.
  const preview = loadConfigOrExit({ ...env, DATABASE_URL: 'postgres://127.0.0.1/preview' });
  try {
    const server = await useEmbeddedPostgres(dir, mode, createLogger(preview.logLevel, undefined, { pretty: prettyLogs(preview.logFormat) }));
    return { env: { ...env, DATABASE_URL: server.url }, psql: server.psql, stop: () => server.stop() };
  } catch (err) {
    if (err instanceof EmbeddedPostgresError) {
      process.stderr.write(`embedded PostgreSQL (DATABASE_URL unset): ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
