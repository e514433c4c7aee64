// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port). DATABASE_URL unset: the embedded
// PostgreSQL of a running `start`, else its own.
import { jobHandlers } from '../jobs/index.js';
import { useLocalChainsFile } from '../src/chains-config.js';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger, prettyLogs } from '../src/log.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { startOrExit } from '../src/runtime/startup-error.js';
import { createWorkerRuntime } from '../src/runtime/worker-runtime.js';

// CHAINS_FILE unset and `npm run chain` has written its file: that chain is used, and said so.
const chains = useLocalChainsFile(process.env);
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
if (chains.found !== null) log.info({ chains_file: chains.found }, 'chains file found');
const worker = await startOrExit(() => createWorkerRuntime(config, log, jobHandlers));
exitOnSignals(log, config.shutdownTimeoutMs, async () => {
  await worker.close();
  await database.stop();
});
