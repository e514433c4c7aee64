// `npm run worker`: one worker process (run several for more throughput).
import { loadConfigOrExit } from '../config.js';
import { createLogger } from '../log.js';
import { exitOnSignals } from '../runtime/shutdown.js';
import { createWorkerRuntime } from '../runtime/worker-runtime.js';

const config = loadConfigOrExit();
const log = createLogger(config.logLevel);
const worker = await createWorkerRuntime(config, log);
exitOnSignals(log, config.shutdownTimeoutMs, () => worker.close());
