// `invoice-lifecycle start` (`npm start`): the local all-in-one mode. Applies migrations, then
// runs the API and a worker in one process. DATABASE_URL unset: runs an embedded PostgreSQL
// first (a second `start` on its folder refuses), stopped after the drain. Ends with one "ready"
// block (a JSON `ready` line when stdout is not a terminal) saying where everything is.
import { catchSignals } from '../src/runtime/shutdown.js';

// First: a SIGTERM from here on (the database starting, the modules loading) is a shutdown.
const shutdown = catchSignals();
const [{ useLocalChainsFile }, { loadConfigOrExit }, { migrate }, { createLogger, prettyLogs, redactUrl }, { chooseDatabaseOrExit }, { startOrExit }] = await Promise.all([
  import('../src/chains-config.js'),
  import('../src/config.js'),
  import('../src/db/migrate.js'),
  import('../src/log.js'),
  import('../src/runtime/database.js'),
  import('../src/runtime/startup-error.js'),
]);
// The service's modules take seconds to load (more when tsx compiles them on a first run): they
// load while the database starts and migrates, instead of before it, in silence.
const modules = Promise.all([
  import('../jobs/index.js'),
  import('../src/runtime/api-runtime.js'),
  import('../src/runtime/worker-runtime.js'),
  import('../src/runtime/listen.js'),
  import('../src/runtime/ready.js'),
  import('../src/chain/chain-answers.js'),
]);
// Awaited below; a failure meanwhile is not an unhandled rejection.
modules.catch(() => undefined);

// CHAINS_FILE unset and `npm run chain` has written its file: that chain is used, and said so.
const chains = useLocalChainsFile(process.env);
const database = await chooseDatabaseOrExit(chains.env, 'own');
const config = loadConfigOrExit(database.env);
const pretty = prettyLogs(config.logFormat);
const log = createLogger(config.logLevel, undefined, { pretty });
shutdown.configure(log, config.shutdownTimeoutMs, () => database.stop());
if (chains.found !== null) log.info({ chains_file: chains.found }, 'chains file found');
try {
  await migrate(config.databaseUrl, (msg) => log.debug(msg), { queueSchema: config.queueBackend === 'postgres' });
} catch (err) {
  log.error({ err, database: redactUrl(config.databaseUrl) }, 'could not apply migrations');
  process.exit(1);
}
if (shutdown.requested()) {
  // Signalled while the database started or migrated: nothing more is started, nothing announced.
  shutdown.ready(() => database.stop());
} else {
  const [{ jobHandlers }, { createApiRuntime }, { createWorkerRuntime }, { boundPort, listenOn }, { announceReady, readyInfo }, { describeWatchedNow }] = await modules;
  // Asked while the runtimes start: the ready block says whether each watched chain answers.
  const watchedChains = describeWatchedNow(config.chains);
  const { api, worker, ports } = await startOrExit(async () => {
    const worker = await createWorkerRuntime(config, log, jobHandlers);
    const api = await createApiRuntime(config, log).catch(async (err: unknown) => {
      await worker.close();
      throw err;
    });
    try {
      const apiPort = await listenOn(api.app, { port: config.port, host: config.host, variable: 'PORT', fallbackToAny: false, movesWhenUnset: false }, log);
      const metricsPort = await api.listenMetrics();
      return { api, worker, ports: { apiPort, metricsPort, workerPort: boundPort(worker.http) } };
    } catch (err) {
      await api.close();
      await worker.close();
      throw err;
    }
  });
  // Signalled while the runtimes started: they close at once (below), and "Ready." would mislead.
  if (!shutdown.requested()) announceReady(log, readyInfo({ config, ...ports, psql: database.psql, watchedChains: await watchedChains }), pretty);
  shutdown.ready(async () => {
    await api.close();
    await worker.close();
    await database.stop();
  });
}
