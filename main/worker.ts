// `invoice-lifecycle worker` (`npm run worker`): one worker process (run several for more
// throughput; on one host each takes its own health port).
import { jobHandlers } from '../jobs/index.js';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { startOrExit } from '../src/runtime/startup-error.js';
import { createWorkerRuntime } from '../src/runtime/worker-runtime.js';

const config = loadConfigOrExit();
const log = createLogger(config.logLevel);
const worker = await startOrExit(() => createWorkerRuntime(config, log, jobHandlers));
exitOnSignals(log, config.shutdownTimeoutMs, () => worker.close());
