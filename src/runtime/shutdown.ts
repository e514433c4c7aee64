import type { Logger } from '../log.js';

/**
 * On SIGTERM/SIGINT runs `close` once (bounded by timeoutMs) and exits 0; a second signal or an
 * overrun exits 1 at once.
 */
export function exitOnSignals(log: Logger, timeoutMs: number, close: () => Promise<void>): void {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) {
      log.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    closing = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ timeout_ms: timeoutMs }, 'shutdown timed out');
      process.exit(1);
    }, timeoutMs + 2_000);
    timer.unref();
    close().then(
      () => {
        log.info('shut down cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
