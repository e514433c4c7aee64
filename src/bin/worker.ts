// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port). DATABASE_URL unset: the embedded
// PostgreSQL of a running `start`, else its own.
import { loadConfigOrExit } from '../config.js';
import { createLogger } from '../log.js';
import { chooseDatabaseOrExit } from '../runtime/database.js';
import { exitOnSignals } from '../runtime/shutdown.js';
import { startOrExit } from '../runtime/startup-error.js';
import { createWorkerRuntime } from '../runtime/worker-runtime.js';

const database = await chooseDatabaseOrExit(process.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel);
const worker = await startOrExit(() => createWorkerRuntime(config, log));
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await worker.close();
  await database.stop();
});
