// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port). DATABASE_URL unset: the embedded
// PostgreSQL of a running `start`, else its own.
import { catchSignals } from '../src/runtime/shutdown.js';

// First, before the service's modules load (seconds under tsx): a SIGTERM from here on drains.
const shutdown = catchSignals();
const [{ jobHandlers }, { useLocalChainsFile }, { loadConfigOrExit }, { createLogger, prettyLogs }, { chooseDatabaseOrExit }, { startOrExit }, { createWorkerRuntime }] =
  await Promise.all([
    import('../jobs/index.js'),
    import('../src/chains-config.js'),
    import('../src/config.js'),
    import('../src/log.js'),
    import('../src/runtime/database.js'),
    import('../src/runtime/startup-error.js'),
    import('../src/runtime/worker-runtime.js'),
  ]);

// CHAINS_FILE unset and `npm run chain` has written its file: that chain is used, and said so.
const chains = useLocalChainsFile(process.env);
const database = await chooseDatabaseOrExit(chains.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
shutdown.configure(log, config.shutdownTimeoutMs, () => database.stop());
if (chains.found !== null) log.info({ chains_file: chains.found }, 'chains file found');
const worker = await startOrExit(() => createWorkerRuntime(config, log, jobHandlers));
shutdown.ready(async () => {
  await worker.close();
  await database.stop();
});
