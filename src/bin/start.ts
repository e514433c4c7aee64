// `npm start`: the local all-in-one mode. Applies migrations, then runs the API and a worker in
// one process. DATABASE_URL unset: runs an embedded PostgreSQL first, stopped after the drain.
import { loadConfigOrExit, orExitOnConfigError } from '../config.js';
import { migrate } from '../db/migrate.js';
import { createLogger, redactUrl } from '../log.js';
import { createApiRuntime } from '../runtime/api-runtime.js';
import { chooseDatabaseOrExit } from '../runtime/database.js';
import { exitOnSignals } from '../runtime/shutdown.js';
import { createWorkerRuntime } from '../runtime/worker-runtime.js';

const database = await chooseDatabaseOrExit(process.env, 'own');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel);
try {
  await migrate(config.databaseUrl, (msg) => log.debug(msg), { queueSchema: config.queueBackend === 'postgres' });
} catch (err) {
  log.error({ err, database: redactUrl(config.databaseUrl) }, 'could not apply migrations');
  process.exit(1);
}
const worker = await orExitOnConfigError(createWorkerRuntime(config, log));
const api = await orExitOnConfigError(createApiRuntime(config, log));
await api.app.listen({ port: config.port, host: config.host });
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await api.close();
  await worker.close();
  await database.stop();
});
