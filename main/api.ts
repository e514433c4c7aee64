// `invoice-lifecycle api` (`npm run api`): the HTTP API alone (migrations are `migrate`'s job in
// a deployment). DATABASE_URL unset: the embedded PostgreSQL of a running `start`, else its own.
import { useLocalChainsFile } from '../src/chains-config.js';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger, prettyLogs } from '../src/log.js';
import { createApiRuntime } from '../src/runtime/api-runtime.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';
import { listenOn } from '../src/runtime/listen.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { startOrExit } from '../src/runtime/startup-error.js';

// CHAINS_FILE unset and `npm run chain` has written its file: that chain is used, and said so.
const chains = useLocalChainsFile(process.env);
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
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
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await api.close();
  await database.stop();
});
