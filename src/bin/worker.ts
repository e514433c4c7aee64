// `npm run worker`: one worker process (run several for more throughput).
import { loadConfigOrExit, orExitOnConfigError } from '../config.js';
import { createLogger } from '../log.js';
import { chooseDatabaseOrExit } from '../runtime/database.js';
import { exitOnSignals } from '../runtime/shutdown.js';
import { createWorkerRuntime } from '../runtime/worker-runtime.js';

const database = await chooseDatabaseOrExit(process.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel);
const worker = await orExitOnConfigError(createWorkerRuntime(config, log));
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await worker.close();
  await database.stop();
});
