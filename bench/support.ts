// Shared plumbing of the hand-run benchmarks (bench/send.ts, bench/api.ts). Never imported by the
// service or the tests. Every benchmark gets its own database, Redis prefix and SMTP sink, and
// removes them at the end.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate } from '../src/db/migrate.js';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const DEFAULT_PG = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const started = performance.now();
export function note(msg: string): void {
  process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export type BenchBackend = 'redis' | 'postgres';

/** `--backend postgres|redis|both` (default both) from the command line; the other arguments stay. */
export function backendsFromArgs(argv: string[]): { backends: BenchBackend[]; rest: string[] } {
  const rest: string[] = [];
  let choice = 'both';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--backend') choice = argv[++i] ?? '';
    else if (a.startsWith('--backend=')) choice = a.slice('--backend='.length);
    else rest.push(a);
  }
  return { backends: backendsOf(choice), rest };
}

/** The backends a `--backend` value names: postgres, redis or both. */
export function backendsOf(choice: string): BenchBackend[] {
  if (choice === 'both') return ['postgres', 'redis'];
  if (choice === 'postgres' || choice === 'redis') return [choice];
  throw new Error(`--backend must be postgres, redis or both, got "${choice}"`);
}

/** The environment that puts a spawned api/worker on the queue backend (own Redis prefix). */
export function backendEnv(backend: BenchBackend, prefix: string): Record<string, string> {
  return backend === 'redis' ? { QUEUE_BACKEND: 'redis', REDIS_URL, REDIS_PREFIX: prefix } : { QUEUE_BACKEND: 'postgres' };
}

/** "load 1.23 1.10 0.90 (2 cpus)", like uptime. */
export function loadAvg(): string {
  return `load ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;
}

/** The code under test: HEAD, and whether src/ or jobs/ differ from it (others edit concurrently). */
export function codeVersion(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'jobs', 'templates'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => l.slice(3));
    return `commit ${head}${dirty.length ? ` + uncommitted changes to ${dirty.join(', ')}` : ''}`;
  } catch {
    return 'commit unknown';
  }
}

export function randomSuffix(): string {
  return randomBytes(4).toString('hex');
}

// ---------------------------------------------------------------------------------------------
// Postgres and Redis of one run

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/**
 * A pool on a bench database. `pool.end()` resolves while its connections may still be closing;
 * the database's drop (with force) then terminates them, and an 'error' with no listener would
 * end the process after its report: a bench never crashes on a client it already let go.
 */
export function openBenchPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/** `queueSchema`: also BullMQ's `bullmq` schema, for a run on the Postgres queue backend. */
export async function createBenchDatabase(opts: { queueSchema?: boolean } = {}): Promise<BenchDatabase> {
  const name = `invoices_bench_${randomSuffix()}`;
  const url = new URL(DEFAULT_PG);
  url.pathname = `/${name}`;
  await migrate(url.toString(), undefined, { queueSchema: opts.queueSchema ?? false });
  return {
    name,
    url: url.toString(),
    async drop() {
      const admin = new pg.Client({ connectionString: DEFAULT_PG });
      await admin.connect();
      try {
        await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}


// ---------------------------------------------------------------------------------------------
// Child processes (the service's own entrypoints, run the way `npm start` / `npm run worker` do)

export interface Child {
  label: string;
  child: ChildProcess;
  pid: number;
  /** Last output lines, for diagnostics when it dies. */
  tail(): string;
  stop(timeoutMs?: number): Promise<void>;
}

export function spawnTs(label: string, script: string, args: string[], env: Record<string, string>, nodeArgs: string[] = []): Child {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(l);
    if (lines.length > 50) lines.splice(0, lines.length - 50);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let stopping = false;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      if (!stopping) note(`${label} (pid ${child.pid}) exited unexpectedly: code ${code} signal ${signal}\n${lines.slice(-15).join('\n')}`);
      resolve();
    }),
  );
  return {
    label,
    child,
    pid: child.pid!,
    tail: () => lines.join('\n'),
    async stop(timeoutMs = 15_000) {
      stopping = true;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs `script args` to completion and returns the last stdout line parsed as JSON. */
export async function runTsJson<T>(script: string, args: string[], env: Record<string, string> = {}): Promise<T> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  const last = out.trim().split('\n').pop() ?? '';
  if (code !== 0) throw new Error(`${script} ${args.join(' ')} exited with ${code}: ${out.slice(-2000)}`);
  return JSON.parse(last) as T;
}

export async function waitForHttp(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(url);
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`${url} not answering after ${timeoutMs} ms`);
      await sleep(100);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// /proc readings

/** VmHWM (peak RSS) and VmRSS of a process, in MiB. */
export function memoryOf(pid: number): { peakMiB: number; rssMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { peakMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
}

const CLK_TCK = 100; // getconf CLK_TCK on Linux x86_64/arm64

/** CPU time (user + system) a process used so far, in ms. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

/** CPU ms so far of every process whose /proc/<pid>/cmdline matches (e.g. the postgres backends
 * of one database: their title is "postgres: ... <user> <database> <client> <state>"). */
export function cpuSnapshot(cmdline: RegExp): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSafe('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (!cmdline.test(cmd)) continue;
      out.set(Number(entry), cpuMsOf(Number(entry)));
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** CPU ms used between two snapshots by the processes alive at the second (new ones count from 0). */
export function cpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Machine-wide busy and total jiffies (first line of /proc/stat). */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export function busyPercent(a: { busy: number; total: number }, b: { busy: number; total: number }): number {
  const dt = b.total - a.total;
  return dt > 0 ? ((b.busy - a.busy) / dt) * 100 : NaN;
}

// ---------------------------------------------------------------------------------------------
// Statistics and printing

export { percentile } from '../test/helpers/percentile.js';

export function fmt(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

// ---------------------------------------------------------------------------------------------
// V8 CPU profiles (node --cpu-prof): self time per package, and inclusive time of named
// functions. A profile covers the process's whole life, start-up (tsx) included.

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

function categoryOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : `native ${fn || '(anonymous)'}`;
  // An idle tinypool thread (the PDF render pool) blocks in Atomics.wait inside this loop; the
  // profiler samples that wall time as the function's own. It is waiting, not work.
  if (fn === 'atomicsWaitLoop' && url.includes('/tinypool/')) return '(idle)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(?!.*node_modules\/)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return url.replace(/^node:internal\/(deps\/)?/, 'node:').split('/').slice(0, 2).join('/');
  const file = url.replace(/^file:\/\//, '');
  if (file.startsWith(ROOT)) return file.slice(ROOT.length).split('/').slice(0, 2).join('/');
  return url;
}

export function summarizeProfiles(files: string[], units: number, functions: string[]): { rows: (string | number)[][]; totalMs: number; inclusive: Record<string, number> } {
  const self = new Map<string, number>();
  const inclusive: Record<string, number> = Object.fromEntries(functions.map((f) => [f, 0]));
  let totalMs = 0;
  for (const file of files) {
    const prof = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const byId = new Map(prof.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    for (let i = 0; i < prof.samples.length; i++) {
      const ms = (prof.timeDeltas[i] ?? 0) / 1000;
      const node = byId.get(prof.samples[i]);
      if (!node) continue;
      const cat = categoryOf(node.callFrame.url, node.callFrame.functionName);
      if (cat === '(idle)') continue;
      totalMs += ms;
      self.set(cat, (self.get(cat) ?? 0) + ms);
      const seen = new Set<string>();
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const fn = byId.get(id)!.callFrame.functionName;
        if (Object.hasOwn(inclusive, fn) && !seen.has(fn)) {
          seen.add(fn);
          inclusive[fn] += ms;
        }
      }
    }
  }
  const rows = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 18)
    .map(([cat, ms]) => [cat, fmt(ms, 0), fmt((ms / totalMs) * 100, 1), fmt(ms / units, 2)]);
  return { rows, totalMs, inclusive };
}

// ---------------------------------------------------------------------------------------------
// Validity: a figure measured over failures is not a speed

export interface Validity {
  /** Records that `figure` saw failures (non-2xx responses, failed jobs, missed emails): it is INVALID. */
  invalidate(figure: string, reason: string): void;
  /** Checks `ok`; when false, invalidates `figure` with `reason`. */
  expect(ok: boolean, figure: string, reason: string): boolean;
  /** ' INVALID' when the figure saw failures, '' otherwise: append it to a printed figure. */
  mark(figure: string): string;
  /** The closing lines: every invalid figure with its reason, or that none was. */
  summary(): string[];
  /** Whether any figure is invalid. */
  any(): boolean;
  /** Sets a non-zero exit code when any figure is invalid (call once, after printing). */
  exitCode(): void;
}

export function createValidity(): Validity {
  const problems = new Map<string, string[]>();
  const invalidate = (figure: string, reason: string) => {
    note(`INVALID ${figure}: ${reason}`);
    problems.set(figure, [...(problems.get(figure) ?? []), reason]);
  };
  return {
    invalidate,
    expect(ok, figure, reason) {
      if (!ok) invalidate(figure, reason);
      return ok;
    },
    mark: (figure) => (problems.has(figure) ? ' INVALID' : ''),
    any: () => problems.size > 0,
    summary() {
      if (problems.size === 0) return ['validity: every figure above is over successful work only (no non-2xx, no failed job, no missed email)'];
      return [
        `INVALID: ${problems.size} figure(s) include failures and are not speeds; no target is met by them:`,
        ...[...problems].map(([figure, reasons]) => `  ${figure}: ${reasons.join('; ')}`),
      ];
    },
    exitCode() {
      if (problems.size > 0) process.exitCode = 1;
    },
  };
}

/** "200: 13188, 429: 12" from an autocannon result's statusCodeStats. */
export function statusCounts(stats: Record<string, { count?: number }> | undefined): string {
  return Object.entries(stats ?? {})
    .map(([code, s]) => `${code}: ${s.count ?? 0}`)
    .join(', ');
}

// ---------------------------------------------------------------------------------------------
// Where a pass's statements go: every query this process sends (the service's pools and BullMQ's
// alike), by statement, with the CPU of this process and of the database's backends.

export interface StatementProfile {
  wallMs: number;
  benchCpuMs: number;
  pgCpuMs: number;
  /** By statement (comments dropped, whitespace folded, first 70 characters): calls and ms in flight. */
  statements: [string, { n: number; ms: number }][];
}

/**
 * Patches pg's Pool.query and Client.query until stop() (a pool's query calls its client's with a
 * callback, which is not counted twice); this process should run nothing else meanwhile.
 */
export function startStatementProfile(dbName: string): { stop(): StatementProfile } {
  const statements = new Map<string, { n: number; ms: number }>();
  type Query = (...a: unknown[]) => unknown;
  const protos = [pg.Pool.prototype, pg.Client.prototype] as unknown as { query: Query }[];
  const originals = protos.map((p) => p.query);
  protos.forEach((proto, i) => {
    const originalQuery = originals[i];
    proto.query = function (this: unknown, ...a: unknown[]) {
      const result = originalQuery.apply(this, a);
      if (!(result instanceof Promise)) return result;
      const text = typeof a[0] === 'string' ? a[0] : ((a[0] as { text?: string } | undefined)?.text ?? '?');
      const label = text.replace(/--[^\n]*/g, '').replace(/\s+/g, ' ').trim().slice(0, 70);
      const t = performance.now();
      return result.finally(() => {
        const s = statements.get(label) ?? { n: 0, ms: 0 };
        s.n++;
        s.ms += performance.now() - t;
        statements.set(label, s);
      });
    };
  });
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  const backends = new RegExp(`postgres: .*${dbName}`);
  const pg0 = cpuSnapshot(backends);
  return {
    stop() {
      protos.forEach((proto, i) => (proto.query = originals[i]));
      const cpu = process.cpuUsage(cpu0);
      return {
        wallMs: performance.now() - wall0,
        benchCpuMs: (cpu.user + cpu.system) / 1000,
        pgCpuMs: cpuDelta(pg0, cpuSnapshot(backends)),
        statements: [...statements.entries()].sort((x, y) => y[1].n - x[1].n),
      };
    },
  };
}
