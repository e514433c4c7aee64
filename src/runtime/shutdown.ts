import type { Logger } from '../log.js';

/**
 * A repeat of the signal within this window is the same request: a signal sent to the process
 * group (a terminal's Ctrl-C, `kill -- -pgid`, npm or tsx forwarding what they received) reaches
 * node more than once.
 */
const REPEAT_WINDOW_MS = 2_000;

/**
 * A long-running command's SIGTERM/SIGINT, from its first statement to its exit. Until a handler
 * is installed node dies of the signal, so the entrypoint calls catchSignals() before it loads the
 * service's modules (seconds under tsx) or starts anything: a signal that arrives while the
 * process starts (a deploy rolling a worker that has just come up) is a shutdown like any other,
 * never a death by the signal.
 */
export interface Shutdown {
  /**
   * The configuration is loaded: its log and SHUTDOWN_TIMEOUT_MS, and what stops the part of the
   * start already done (the embedded PostgreSQL) if the start is abandoned. A signal received
   * before (while the database was chosen or started) is logged now and its bound counts from it.
   */
  configure(log: Logger, timeoutMs: number, stopStarted: () => Promise<void>): void;
  /**
   * The process is up and `close` stops it: stops taking work and lets active jobs and requests
   * finish. A signal received during start-up runs it now (what the start opened, it closes).
   */
  ready(close: () => Promise<void>): void;
  /** A signal has come: a start not yet done starts nothing more, and announces nothing. */
  requested(): boolean;
}

/**
 * On SIGTERM/SIGINT runs `close` once and exits 0. Past `timeoutMs` (from the signal) the process
 * exits 0 anyway, leaving the jobs still running to be retried by another worker once their locks
 * expire (nothing is lost: every send and reminder is idempotent), or a start-up still under way
 * (waiting for Redis, say) abandoned. The same signal again within REPEAT_WINDOW_MS is ignored; a
 * signal after that (an operator insisting) exits 1 at once. `close` failing exits 1.
 */
export function catchSignals(): Shutdown {
  let log: Logger | null = null;
  let timeoutMs: number | null = null;
  let close: (() => Promise<void>) | null = null;
  let stopStarted: () => Promise<void> = async () => undefined;
  let signalled: { signal: NodeJS.Signals; at: number } | null = null;
  // The start was abandoned: a `ready` after that closes nothing twice.
  let abandoned = false;

  // Arms the bound once both the signal and the configuration are known.
  const armTimer = () => {
    if (signalled === null || log === null || timeoutMs === null) return;
    const l = log;
    const bound = timeoutMs;
    const timer = setTimeout(
      () => {
        if (close !== null) {
          l.warn({ timeout_ms: bound }, 'work still active at SHUTDOWN_TIMEOUT_MS; exiting, its jobs are retried once their locks expire');
          process.exit(0);
        }
        // A start that long after the signal is waiting (for Redis, say): nothing to drain, but an
        // embedded PostgreSQL it started must not outlive it.
        l.warn({ timeout_ms: bound }, 'still starting at SHUTDOWN_TIMEOUT_MS after the signal; exiting');
        abandoned = true;
        stopStarted().then(
          () => process.exit(0),
          (err: unknown) => {
            l.error({ err }, 'error while shutting down');
            process.exit(1);
          },
        );
      },
      Math.max(0, signalled.at + bound - Date.now()),
    );
    timer.unref();
  };
  const runClose = () => {
    if (signalled === null || close === null || abandoned) return;
    close().then(
      () => {
        log?.info('shut down cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        log?.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  const handler = (signal: NodeJS.Signals) => {
    if (signalled !== null) {
      if (Date.now() - signalled.at <= REPEAT_WINDOW_MS) {
        log?.debug({ signal }, 'signal repeated; already shutting down');
        return;
      }
      log?.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    signalled = { signal, at: Date.now() };
    log?.info({ signal, timeout_ms: timeoutMs, starting: close === null }, 'shutting down');
    armTimer();
    runClose();
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);

  return {
    configure(l, ms, stop) {
      log = l;
      timeoutMs = ms;
      stopStarted = stop;
      if (signalled === null) return;
      l.info({ signal: signalled.signal, timeout_ms: ms, starting: true }, 'shutting down');
      armTimer();
    },
    ready(c) {
      close = c;
      runClose();
    },
    requested: () => signalled !== null,
  };
}
