// `invoice-lifecycle start` (`npm start`): the local all-in-one mode. Applies migrations, then
// runs the API and a worker in one process. DATABASE_URL unset: runs an embedded PostgreSQL
// first (a second `start` on its folder refuses), stopped after the drain.
import { jobHandlers } from '../jobs/index.js';
import { loadConfigOrExit } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createLogger, redactUrl } from '../src/log.js';
import { createApiRuntime } from '../src/runtime/api-runtime.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';
import { listenOn } from '../src/runtime/listen.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { startOrExit } from '../src/runtime/startup-error.js';
import { createWorkerRuntime } from '../src/runtime/worker-runtime.js';

const database = await chooseDatabaseOrExit(process.env, 'own');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel);
try {
  await migrate(config.databaseUrl, (msg) => log.debug(msg), { queueSchema: config.queueBackend === 'postgres' });
} catch (err) {
  log.error({ err, database: redactUrl(config.databaseUrl) }, 'could not apply migrations');
  process.exit(1);
}
const { api, worker } = await startOrExit(async () => {
  const worker = await createWorkerRuntime(config, log, jobHandlers);
  const api = await createApiRuntime(config, log).catch(async (err: unknown) => {
    await worker.close();
    throw err;
  });
  try {
    await listenOn(api.app, { port: config.port, host: config.host, variable: 'PORT', fallbackToAny: false, movesWhenUnset: false }, log);
    await api.listenMetrics();
  } catch (err) {
    await api.close();
    await worker.close();
    throw err;
  }
  return { api, worker };
});
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await api.close();
  await worker.close();
  await database.stop();
});
