// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port). DATABASE_URL unset: the embedded
// PostgreSQL of a running `start`, else its own.
import { jobHandlers } from '../jobs/index.js';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger, prettyLogs } from '../src/log.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { startOrExit } from '../src/runtime/startup-error.js';
import { createWorkerRuntime } from '../src/runtime/worker-runtime.js';

const database = await chooseDatabaseOrExit(process.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
const worker = await startOrExit(() => createWorkerRuntime(config, log, jobHandlers));
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await worker.close();
  await database.stop();
});
