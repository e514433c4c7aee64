// The npm scripts as a newcomer, a supervisor (`CMD npm start`) or a CI runner uses them: a
// SIGTERM sent to the npm process alone must reach the service, which drains and stops its
// embedded PostgreSQL, leaving nothing running and the folder free for the next `npm start`.
import { mkdtemp, readFile, rm, chmod } from 'node:fs/promises';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import { alive, procOf, signal, type Proc } from '../helpers/proc.js';
import { ROOT, spawnWorker, waitUntil, type WorkerProcess } from '../helpers/worker.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

function refused(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

/** The scripts that start a process of the service (`chain` is another's and follows the same rule). */
const SERVICE_SCRIPTS = ['start', 'api', 'worker', 'migrate', 'demo'] as const;

describe('npm scripts', () => {
  it('every script that starts the service replaces the shell with node (npm signals the shell, which passes nothing on)', async () => {
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    for (const name of SERVICE_SCRIPTS) expect(pkg.scripts[name], name).toBe(`exec node --import tsx main/${name}.ts`);
    // Any other script running an entrypoint (a later `chain`) too.
    for (const [name, script] of Object.entries(pkg.scripts)) if (/\bmain\//.test(script)) expect(script, name).toMatch(/^exec /);
  });

  it('SIGTERM to the npm process of `npm start`: the service and its embedded PostgreSQL stop, the port is free, a second `npm start` works', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'npm-start-'));
    // As root the server runs as the `postgres` user, which must reach the data folder.
    await chmod(dir, 0o755);
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const port = await freePort();
    const env = {
      EMBEDDED_POSTGRES_DIR: path.join(dir, 'pg'),
      MAIL_OUTBOX_DIR: path.join(dir, 'outbox'),
      PORT: String(port),
      METRICS_PORT: '0',
      WORKER_PORT: '0',
      PDF_RENDER_THREADS: '0',
      // The embedded database and the Postgres queue backend: nothing but this folder is shared.
      DATABASE_URL: '',
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: '',
      QUEUE_BACKEND: '',
    };
    type ServerFile = { ownerPid: number; postgresPid: number; port: number };
    const startNpm = async (extra: Record<string, string> = {}): Promise<{ npm: WorkerProcess; service: Proc; postgres: Proc; server: ServerFile }> => {
      const npm = spawnWorker({ ...env, ...extra }, { npm: true, command: 'start' });
      cleanups.push(() => npm.stop('SIGKILL'));
      // The last thing start says: a `ready` line (JSON, stdout is a pipe here) or the ready block.
      await waitUntil(async () => npm.lines.some((l) => l.includes('"msg":"ready"') || l === 'Ready.'), 90_000, 100);
      const server = JSON.parse(await readFile(path.join(dir, 'pg', 'server.json'), 'utf8')) as ServerFile;
      // Both run now (the ready line came after them): named by pid and start time from here on.
      const [service, postgres] = [server.ownerPid, server.postgresPid].map((pid) => {
        const p = procOf(pid);
        if (p === null) throw new Error(`process ${pid} of server.json is not running after the ready line`);
        return p;
      });
      // On a failure, leave nothing running behind the test either.
      cleanups.push(async () => {
        for (const p of [service, postgres]) signal(p, 'SIGKILL');
      });
      // npm is not the service: the signal has to travel.
      expect(server.ownerPid).not.toBe(npm.child.pid);
      expect(await refused(port)).toBe(false);
      return { npm, service, postgres, server };
    };

    const first = await startNpm();
    // JSON (stdout is not a terminal): one `ready` line, after the ports are bound, with what the ready block shows.
    const readyLines = first.npm.lines.filter((l) => l.includes('"msg":"ready"'));
    expect(readyLines).toHaveLength(1);
    const ready = JSON.parse(readyLines[0]) as Record<string, unknown>;
    expect(ready.pid).toBe(first.service.pid);
    expect(first.npm.lines.findIndex((l) => l.includes('API metrics on METRICS_PORT'))).toBeLessThan(first.npm.lines.indexOf(readyLines[0]));
    expect(ready).toMatchObject({
      api_url: `http://127.0.0.1:${port}`,
      // PAYMENT_PAGE_BASE unset: this API's own page, on its PORT.
      payment_page: expect.stringMatching(new RegExp(`^http://localhost:${port}/pay/`)),
      dashboard: 'off (set ADMIN_USER and ADMIN_PASSWORD to turn it on)',
      metrics_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/),
      worker_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/readyz$/),
      mail: { live: `.eml files in ${path.join(dir, 'outbox')}`, sandbox: `.eml files in ${path.join(dir, 'outbox')}` },
      queue_backend: 'postgres',
      database: `postgres://postgres:***@127.0.0.1:${first.server.port}/invoices`,
      psql: `PGPASSFILE=${path.join(dir, 'pg', 'pgpass')} psql -h 127.0.0.1 -p ${first.server.port} -U postgres invoices`,
      chains: [],
      chains_note: 'no chains watched (set CHAINS_FILE or RPC_URL_<chainId>)',
    });
    // Each address it gives answers.
    expect((await fetch(ready.metrics_url as string)).status).toBe(200);
    expect((await fetch(ready.worker_url as string)).status).toBe(200);
    // HOST unset: the API, its metrics port and the worker port listen on this machine only.
    const listening = first.npm.lines.map((l) => /"msg":"Server listening at http:\/\/([^"]+):\d+"/.exec(l)?.[1]).filter((h) => h !== undefined);
    expect(listening).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1']);
    const external = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal);
    if (external) expect(await refused(port, external.address)).toBe(true);
    // The npm process alone, not its group: as supervisord or `kill <pid>` does.
    first.npm.child.kill('SIGTERM');
    expect(await first.npm.exited).toBe(0);
    expect(first.npm.lines.some((l) => l.includes('"msg":"shut down cleanly"'))).toBe(true);
    expect(first.npm.lines.some((l) => l.includes('embedded PostgreSQL stopped'))).toBe(true);
    expect(alive(first.service)).toBe(false);
    expect(alive(first.postgres)).toBe(false);
    expect(await refused(port)).toBe(true);
    await expect(readFile(path.join(dir, 'pg', 'server.json'))).rejects.toThrow(/ENOENT/);

    // Readable lines (LOG_FORMAT=pretty, as on a terminal): no JSON, and the ready block last.
    const second = await startNpm({ LOG_FORMAT: 'pretty' });
    expect(second.npm.lines.some((l) => l.includes('already in use'))).toBe(false);
    expect(second.npm.lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(second.npm.lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: worker started /.test(l))).toBe(true);
    const block = second.npm.lines.slice(second.npm.lines.indexOf('Ready.'));
    expect(block.filter((l) => l.startsWith('  ')).map((l) => l.trim().split(/ {2,}/)[0])).toEqual([
      'API', 'payment page', 'dashboard', 'metrics', 'worker', 'live mail', 'sandbox mail', 'queues', 'database', 'psql', 'chains',
    ]);
    expect(block).toContain(`  API           http://127.0.0.1:${port}`);
    second.npm.child.kill('SIGTERM');
    expect(await second.npm.exited).toBe(0);
    expect(alive(second.service)).toBe(false);
    expect(alive(second.postgres)).toBe(false);
  }, 180_000);

  it('SIGTERM to the npm process of `npm start` at each stage of its start (cluster created, server starting, server up): exit 0 after the start, the embedded PostgreSQL stopped, a second start works', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'npm-start-signal-'));
    await chmod(dir, 0o755);
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = {
      EMBEDDED_POSTGRES_DIR: path.join(dir, 'pg'),
      MAIL_OUTBOX_DIR: path.join(dir, 'outbox'),
      PORT: String(await freePort()),
      METRICS_PORT: '0',
      WORKER_PORT: '0',
      PDF_RENDER_THREADS: '0',
      DATABASE_URL: '',
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: '',
      QUEUE_BACKEND: '',
      // The bound counts from the signal: ample for the rest of a start on a loaded machine, so
      // the drain (not the abandon of a start that waits, tested in processes.test.ts) is what runs.
      SHUTDOWN_TIMEOUT_MS: '120000',
    };
    // The first start creates the cluster; the later ones find it.
    for (const stage of ['creating the embedded PostgreSQL cluster', 'starting the embedded PostgreSQL', 'embedded PostgreSQL: data in']) {
      const npm = spawnWorker(env, { npm: true, command: 'start' });
      cleanups.push(() => npm.stop('SIGKILL'));
      await waitUntil(async () => npm.lines.some((l) => l.includes(`"msg":"${stage}`)), 90_000, 20);
      npm.child.kill('SIGTERM');
      expect({ stage, code: await npm.exited }, npm.lines.slice(-5).join('\n')).toEqual({ stage, code: 0 });
      expect(npm.lines.some((l) => l.includes('"msg":"shut down cleanly"')), `${stage}\n${npm.lines.join('\n')}`).toBe(true);
      expect(npm.lines.some((l) => l.includes('embedded PostgreSQL stopped')), stage).toBe(true);
      await expect(readFile(path.join(dir, 'pg', 'server.json')), stage).rejects.toThrow(/ENOENT/);
    }
  }, 300_000);
});
