// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port).
import { loadConfigOrExit } from '../config.js';
import { createLogger } from '../log.js';
import { exitOnSignals } from '../runtime/shutdown.js';
import { startOrExit } from '../runtime/startup-error.js';
import { createWorkerRuntime } from '../runtime/worker-runtime.js';

const config = loadConfigOrExit();
const log = createLogger(config.logLevel);
const worker = await startOrExit(() => createWorkerRuntime(config, log));
exitOnSignals(log, config.shutdownTimeoutMs, () => worker.close());
