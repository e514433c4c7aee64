// `npm run api`: the HTTP API alone (migrations are `npm run migrate`'s job in a deployment).
import { loadConfigOrExit, orExitOnConfigError } from '../config.js';
import { createLogger } from '../log.js';
import { createApiRuntime } from '../runtime/api-runtime.js';
import { chooseDatabaseOrExit } from '../runtime/database.js';
import { exitOnSignals } from '../runtime/shutdown.js';

const database = await chooseDatabaseOrExit(process.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel);
const api = await orExitOnConfigError(createApiRuntime(config, log));
await api.app.listen({ port: config.port, host: config.host });
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await api.close();
  await database.stop();
});
