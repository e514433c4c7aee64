// `npm run api`: the HTTP API alone (migrations are `npm run migrate`'s job in a deployment).
import { loadConfigOrExit } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { createApiRuntime } from '../src/runtime/api-runtime.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';

const config = loadConfigOrExit();
const log = createLogger(config.logLevel);
const api = await createApiRuntime(config, log);
await api.app.listen({ port: config.port, host: config.host });
exitOnSignals(log, config.shutdownTimeoutMs, () => api.close());
