// Worker processes for tests: in this process (createWorkerRuntime), or as real child processes
// (`main/cli.ts worker`, or a build's compiled `main/cli.js`) for scale-out and crash tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Queue } from 'bullmq';
import { jobHandlers } from '../../jobs/index.js';
import { environmentOf, type Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createWorkerRuntime, type WorkerRuntimeOptions, type WorkerRuntime } from '../../src/runtime/worker-runtime.js';

export async function startWorker(config: Config, opts: WorkerRuntimeOptions = {}): Promise<WorkerRuntime> {
  const worker = await createWorkerRuntime(config, createLogger('silent'), jobHandlers, opts);
  await Promise.all(worker.workers.map((w) => w.waitUntilReady()));
  return worker;
}

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A folder that never holds a chains file. */
export const NO_LOCAL_CHAIN_DIR = fileURLToPath(new URL('../../var/no-local-chain-in-tests/', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  /** Log lines (JSON) the process wrote so far. */
  lines: string[];
  /** Resolves when a log line matching the predicate appears. */
  waitForLine(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Resolves with the exit code when the process ends by itself. */
  exited: Promise<number | null>;
}

export interface SpawnOptions {
  /** Run this compiled CLI (`node <build>/main/cli.js <command>`, as production runs dist/main/cli.js; see buildService()). */
  compiled?: string;
  /** The CLI command; default `worker`. */
  command?: 'worker' | 'api' | 'migrate' | 'start' | 'demo';
  /** Through its npm script (`npm run <command>`), as a newcomer or a supervisor starts it: the child is npm. */
  npm?: boolean;
}

/** A worker (or another CLI command) as a child process, with the given environment on top of the test's. */
export function spawnWorker(env: Record<string, string>, opts: SpawnOptions = {}): WorkerProcess {
  const command = opts.command ?? 'worker';
  const args = opts.compiled ? [opts.compiled, command] : ['--import', 'tsx', 'main/cli.ts', command];
  const child = spawn(opts.npm ? 'npm' : process.execPath, opts.npm ? ['run', command] : args, {
    cwd: ROOT,
    // CHAIN_STATE_DIR: a developer's own `npm run chain` (var/chain/chains.json) must not join a
    // test's processes, which would find it when CHAINS_FILE is unset.
    env: { ...process.env, LOG_LEVEL: 'info', CHAIN_STATE_DIR: NO_LOCAL_CHAIN_DIR, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const listeners = new Set<() => void>();
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let i: number;
    while ((i = buffer.indexOf('\n')) >= 0) {
      lines.push(buffer.slice(0, i));
      buffer = buffer.slice(i + 1);
    }
    for (const l of listeners) l();
  });
  child.stderr!.on('data', (chunk: Buffer) => lines.push(`stderr: ${chunk.toString('utf8')}`));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const parsed = (l: string): Record<string, unknown> | null => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return null;
    }
  };
  return {
    child,
    lines,
    exited,
    waitForLine(match, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (const l of lines) {
            const p = parsed(l);
            if (p && match(p)) {
              listeners.delete(check);
              clearTimeout(timer);
              resolve(p);
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`no matching log line after ${timeoutMs} ms; last lines:\n${lines.slice(-10).join('\n')}`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * The bound of a test that waits, one after another, for several states of a chain, a page or a
 * worker, each wait bounded on its own: room for all of them on a loaded 2-core machine, where
 * vitest's 30 s default can be used up by one slow step (CI, stop 42: a wallet payment's test).
 */
export const MULTI_STATE_TEST_TIMEOUT_MS = 120_000;

/**
 * Waits for `check` to hold. `state`, when given, says in the failure what was reached instead
 * (a count, the queue's state): a timeout on a loaded CI machine is then a clue, not a shrug.
 */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs = 10_000, intervalMs = 50, state?: () => Promise<string> | string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${state ? `: ${await state()}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The environment a child worker process needs to join a test's database, prefix and SMTP sink. */
export function workerProcessEnv(config: Config, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...environmentOf(config, ['databaseUrl', 'queueBackend', 'redisUrl', 'redisClusterNodes', 'redisPrefix', 'paymentPageBase', 'mailFrom', 'smtpUrl', 'sandboxSmtpUrl']),
    // Any free port: several workers of one test share the host.
    ...environmentOf({ ...config, workerPort: 0 }, ['workerPort']),
    ...extra,
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
export const sleepUntil = (t: number) => sleep(t - Date.now());

/**
 * Until the queue has nothing waiting, delayed, prioritized or running: every job added so far has
 * finished. The positive signal after which the absence of a further effect (a second email) means
 * something.
 */
export async function waitQueueDrained(queue: Pick<Queue, 'getJobCounts'>, timeoutMs = 10_000): Promise<void> {
  await waitUntil(async () => Object.values(await queue.getJobCounts('waiting', 'delayed', 'prioritized', 'active')).every((n) => n === 0), timeoutMs, 20);
}
