// `invoice-lifecycle api` (`npm run api`): the HTTP API alone (migrations are `migrate`'s job in
// a deployment). DATABASE_URL unset: the embedded PostgreSQL of a running `start`, else its own.
import { catchSignals } from '../src/runtime/shutdown.js';

// First, before the service's modules load (seconds under tsx): a SIGTERM from here on drains.
const shutdown = catchSignals();
const [{ useLocalChainsFile }, { loadConfigOrExit }, { createLogger, prettyLogs }, { createApiRuntime }, { chooseDatabaseOrExit }, { listenOn }, { startOrExit }] = await Promise.all([
  import('../src/chains-config.js'),
  import('../src/config.js'),
  import('../src/log.js'),
  import('../src/runtime/api-runtime.js'),
  import('../src/runtime/database.js'),
  import('../src/runtime/listen.js'),
  import('../src/runtime/startup-error.js'),
]);

// CHAINS_FILE unset and `npm run chain` has written its file: that chain is used, and said so.
const chains = useLocalChainsFile(process.env);
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
shutdown.configure(log, config.shutdownTimeoutMs, () => database.stop());
if (chains.found !== null) log.info({ chains_file: chains.found }, 'chains file found');
const api = await startOrExit(async () => {
  const runtime = await createApiRuntime(config, log);
  try {
    await listenOn(runtime.app, { port: config.port, host: config.host, variable: 'PORT', fallbackToAny: false, movesWhenUnset: false }, log);
    await runtime.listenMetrics();
  } catch (err) {
    await runtime.close();
    throw err;
  }
  return runtime;
});
shutdown.ready(async () => {
  await api.close();
  await database.stop();
});
