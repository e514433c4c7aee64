import type { Logger } from '../log.js';

/**
 * A repeat of the signal within this window is the same request: a signal sent to the process
 * group (a terminal's Ctrl-C, `kill -- -pgid`, npm or tsx forwarding what they received) reaches
 * node more than once.
 */
const REPEAT_WINDOW_MS = 2_000;

/**
 * On SIGTERM/SIGINT runs `close` once and exits 0. `close` stops taking work and lets active jobs
 * and requests finish; past `timeoutMs` the process exits 0 anyway, leaving the jobs still running
 * to be retried by another worker once their locks expire (nothing is lost: every send and
 * reminder is idempotent). The same signal again within REPEAT_WINDOW_MS is ignored; a signal
 * after that (an operator insisting) exits 1 at once. `close` failing exits 1.
 */
export function exitOnSignals(log: Logger, timeoutMs: number, close: () => Promise<void>): void {
  let closingSince: number | null = null;
  const handler = (signal: NodeJS.Signals) => {
    if (closingSince !== null) {
      if (Date.now() - closingSince <= REPEAT_WINDOW_MS) {
        log.debug({ signal }, 'signal repeated; already shutting down');
        return;
      }
      log.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    closingSince = Date.now();
    log.info({ signal, timeout_ms: timeoutMs }, 'shutting down');
    const timer = setTimeout(() => {
      log.warn({ timeout_ms: timeoutMs }, 'work still active at SHUTDOWN_TIMEOUT_MS; exiting, its jobs are retried once their locks expire');
      process.exit(0);
    }, timeoutMs);
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
