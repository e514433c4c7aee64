// anvil (Foundry's local EVM node) as a child process, from the `@foundry-rs/anvil` npm package's
// platform package: no download, no Foundry install. Dev tooling: imported by main/chain.ts, the
// tests and the benchmarks, never by the service (.dependency-cruiser.cjs).
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LOCAL_CHAIN_ID } from '../domain/chains.js';

const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 10_000;
const READY_POLL_MS = 50;
/** Lines of anvil's output kept to explain a failed start. */
const OUTPUT_TAIL_LINES = 30;

export class AnvilError extends Error {}

export interface AnvilOptions {
  /** 0: anvil binds a free port and says which (read from its "Listening on" line). */
  port: number;
  host?: string;
  chainId?: number;
  /** Seconds between blocks (interval mining); unset: a block per transaction (automine). */
  blockTime?: number;
  /** `--state <file>`: loaded at start when it exists, written on exit (SIGTERM or SIGINT). */
  statePath?: string;
  /** `--state-interval`: also written every n seconds, so a SIGKILL loses at most that much. */
  stateIntervalSeconds?: number;
  /**
   * Run anvil in its own process group: a terminal's Ctrl-C then reaches only this process, which
   * stops anvil once (one state dump, never two signals racing in the middle of it).
   */
  ownProcessGroup?: boolean;
  /** Extra command-line arguments, appended as given. */
  extraArgs?: readonly string[];
  readyTimeoutMs?: number;
}

export interface AnvilProcess {
  rpcUrl: string;
  host: string;
  port: number;
  chainId: number;
  pid: number;
  /** Settles when anvil has exited, for whatever reason. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last lines anvil printed (for error messages). */
  outputTail(): string;
  /** SIGTERM (anvil writes its state and exits), then SIGKILL past timeoutMs. Idempotent. */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * The anvil binary of this platform. npm installs only the platform package matching the machine
 * (the wrapper package's postinstall, which would link it, may be skipped), so it is resolved from
 * there; other platforms get a clear error rather than ENOENT.
 */
export function anvilBinary(): string {
  const pkg = `@foundry-rs/anvil-${process.platform}-${archName(process.arch)}`;
  try {
    const manifest = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
    return path.join(path.dirname(manifest), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
  } catch {
    throw new AnvilError(
      `anvil: no binary for ${process.platform}/${process.arch} (npm package ${pkg} is not installed; ` +
        `@foundry-rs/anvil ships linux and darwin on x64/arm64, and win32 on x64)`,
    );
  }
}

function archName(arch: string): string {
  return arch === 'x64' ? 'amd64' : arch;
}

/** The command-line arguments for these options (exported for the tests and the start line). */
export function anvilArgs(opts: AnvilOptions): string[] {
  const args = ['--host', opts.host ?? '127.0.0.1', '--port', String(opts.port), '--chain-id', String(opts.chainId ?? LOCAL_CHAIN_ID)];
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));
  if (opts.statePath !== undefined) args.push('--state', opts.statePath);
  if (opts.stateIntervalSeconds !== undefined) args.push('--state-interval', String(opts.stateIntervalSeconds));
  args.push(...(opts.extraArgs ?? []));
  return args;
}

/** Starts anvil and resolves once it answers `eth_chainId` with the expected id. */
export async function startAnvil(opts: AnvilOptions): Promise<AnvilProcess> {
  const host = opts.host ?? '127.0.0.1';
  const chainId = opts.chainId ?? LOCAL_CHAIN_ID;
  const child = spawn(anvilBinary(), anvilArgs(opts), {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.ownProcessGroup === true,
  });
  const tail: string[] = [];
  let boundPort: number | null = opts.port === 0 ? null : opts.port;
  const onLine = (line: string) => {
    const listening = /^Listening on .*:(\d+)\s*$/.exec(line);
    if (listening && boundPort === null) boundPort = Number(listening[1]);
    tail.push(line);
    if (tail.length > OUTPUT_TAIL_LINES) tail.shift();
  };
  // anvil logs every request: the pipes are always drained, or it would block on a full pipe.
  for (const stream of [child.stdout, child.stderr]) {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) onLine(line);
    });
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  const outputTail = () => tail.join('\n');
  LIVE.add(child);
  void exited.then(() => LIVE.delete(child));
  installExitHook();

  let stopping: Promise<void> | null = null;
  const stop = (timeoutMs = STOP_TIMEOUT_MS) => {
    stopping ??= stopChild(child, exited, timeoutMs);
    return stopping;
  };

  // Set by the child's events while the loop below waits; read on each turn.
  const early: { exit: { code: number | null; signal: NodeJS.Signals | null } | null; spawnError: Error | null } = { exit: null, spawnError: null };
  void exited.then((e) => (early.exit = e));
  void spawnError.then((e) => (early.spawnError = e));
  const deadline = Date.now() + (opts.readyTimeoutMs ?? READY_TIMEOUT_MS);
  for (;;) {
    if (early.spawnError !== null) throw new AnvilError(`anvil: could not start ${anvilBinary()}: ${early.spawnError.message}`);
    if (early.exit !== null) {
      throw new AnvilError(`anvil exited during start-up (code ${early.exit.code}, signal ${early.exit.signal}):\n${outputTail()}`);
    }
    if (boundPort !== null) {
      const answered = await chainIdAt(`http://${host}:${boundPort}`);
      if (answered === chainId) break;
      if (answered !== null) {
        await stop();
        throw new AnvilError(`anvil: ${host}:${boundPort} answers chain id ${answered}, expected ${chainId} (another node on that port?)`);
      }
    }
    if (Date.now() > deadline) {
      await stop();
      throw new AnvilError(`anvil did not answer eth_chainId within ${opts.readyTimeoutMs ?? READY_TIMEOUT_MS} ms:\n${outputTail()}`);
    }
    await new Promise((r) => setTimeout(r, READY_POLL_MS));
  }
  const port = boundPort as number;
  return { rpcUrl: `http://${host}:${port}`, host, port, chainId, pid: child.pid as number, exited, outputTail, stop };
}

/** Children not yet exited: an exit of this process that skipped stop() still ends them. */
const LIVE = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // SIGTERM, not SIGKILL: anvil still writes its state, on its own, after this process is gone.
  process.on('exit', () => {
    for (const child of LIVE) child.kill('SIGTERM');
  });
}

/** The chain id a node at url answers, or null when nothing answers there (yet). */
export async function chainIdAt(url: string): Promise<number | null> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(2_000),
    });
    if (!res.ok) return null;
    const body = (await res.json()) as { result?: string };
    return typeof body.result === 'string' ? Number(BigInt(body.result)) : null;
  } catch {
    return null;
  }
}

async function stopChild(
  child: ChildProcess,
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  timeoutMs: number,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([exited, timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    child.kill('SIGKILL');
    await exited;
  }
}
