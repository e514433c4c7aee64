// `npm run worker`: one worker process (run several for more throughput).
import { jobHandlers } from '../jobs/index.js';
import { loadConfigOrExit } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { exitOnSignals } from '../src/runtime/shutdown.js';
import { createWorkerRuntime } from '../src/runtime/worker-runtime.js';

const config = loadConfigOrExit();
const log = createLogger(config.logLevel);
const worker = await createWorkerRuntime(config, log, jobHandlers);
exitOnSignals(log, config.shutdownTimeoutMs, () => worker.close());
