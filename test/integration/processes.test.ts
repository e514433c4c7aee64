// The service as production runs it: the production build (scripts/build.mjs, into a temporary
// folder, not the working tree's dist/), then `node <build>/main/cli.js <command>` as real
// processes. Signals (SIGTERM mid-batch, a signal delivered twice), ports on a shared host.
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { buildService, type ServiceBuild } from '../helpers/build.js';
import { alive, procOf } from '../helpers/proc.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { ROOT, spawnWorker, startWorker, waitUntil, workerProcessEnv, type SpawnOptions, type WorkerProcess } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
let build: ServiceBuild;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  // The production build, as CI and the Dockerfile make it.
  build = buildService();
  // Each RCPT waits: a batch of sends is still running when the signal arrives.
  sink = await startSmtpSink({ rcptDelayMs: 400 });
  fx = await startApiFixture({ SMTP_URL: sink.url });
}, 240_000);
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
afterAll(async () => {
  await fx?.close();
  await sink?.close();
  build?.remove();
});

function processEnv(extra: Record<string, string> = {}): Record<string, string> {
  return workerProcessEnv(fx.env.config({ SMTP_URL: sink.url }), extra);
}

function spawned(extra: Record<string, string> = {}, opts: SpawnOptions = {}): WorkerProcess {
  const p = spawnWorker(processEnv(extra), { compiled: build.cli, ...opts });
  cleanups.push(() => p.stop('SIGKILL'));
  return p;
}

async function sendInvoices(n: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const headers = { 'api-key': fx.merchant.keys.sandbox };
    const created = await fx.api.app.inject({ method: 'POST', url: '/v1/invoices', headers, payload: { customer_email: `${tag}-${i}@example.test`, amount: '2' } });
    expect(created.statusCode, created.body).toBe(200);
    const id = created.json().data.id as string;
    const sent = await fx.api.app.inject({ method: 'POST', url: `/v1/invoices/${id}/send`, headers });
    expect(sent.statusCode, sent.body).toBe(200);
    ids.push(id);
  }
  return ids;
}

async function sentCount(ids: string[]): Promise<number> {
  const { rows } = await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where invoice_id = any($1) and status = 'sent'`, [ids]);
  return rows[0].n;
}

const recipients = (tag: string) =>
  sink.messages.flatMap(recipientsOf).filter((a) => a.startsWith(`${tag}-`));

async function activeSends(): Promise<number> {
  return fx.api.queues.send.getActiveCount();
}

describe('the compiled build', () => {
  it('package.json names the bin invoice-lifecycle with api, worker, migrate, start and demo; tsx is a dev dependency', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    // The bin is dist/main/cli.js; the build's dist/ is build.dir.
    const bin = path.join(build.dir, path.relative('dist', pkg.bin['invoice-lifecycle']));
    accessSync(bin, constants.X_OK);
    const help = execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    for (const command of ['api', 'worker', 'migrate', 'start', 'demo']) expect(help).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    expect(pkg.dependencies.tsx).toBeUndefined();
    expect(pkg.devDependencies.tsx).toBeDefined();
    const unknown = spawnSync(process.execPath, [bin, 'serve'], { encoding: 'utf8' });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('unknown command "serve"');
  });

  it('migrate finds its SQL from the compiled code', async () => {
    const p = spawned({ DATABASE_URL: fx.env.db.url }, { command: 'migrate' });
    expect(await p.exited).toBe(0);
    expect(p.lines.some((l) => l.includes('migrations applied'))).toBe(true);
  });
});

describe('signals', () => {
  it('SIGTERM mid-batch: active jobs finish, the rest stay queued, exit 0, no process left; another worker sends the rest', async () => {
    // The sends are queued before the worker starts: a backlog it cannot drain before the signal.
    // Queued while it ran, on a loaded machine the worker kept up with the test making them, and
    // had sent all 16 by the time the signal came (the run this was found in).
    const ids = await sendInvoices(16, 'term');
    const worker = spawned({ WORKER_CONCURRENCY: '4', SHUTDOWN_TIMEOUT_MS: '20000' });
    await worker.waitForLine((l) => l.msg === 'worker started');
    const running = procOf(worker.child.pid!);
    expect(running).not.toBeNull();
    await waitUntil(async () => (await sentCount(ids)) >= 1 && (await activeSends()) > 0, 30_000);
    worker.child.kill('SIGTERM');
    const code = await worker.exited;
    expect(code, worker.lines.slice(-5).join('\n')).toBe(0);
    expect(alive(running!)).toBe(false);
    expect(worker.lines.some((l) => l.includes('shut down cleanly'))).toBe(true);
    // Nothing on stderr: no deprecation warning, no unhandled error.
    expect(worker.lines.filter((l) => l.startsWith('stderr: '))).toEqual([]);
    // Nothing left half-done: every job it held finished (sent), none is active any more.
    expect(await activeSends()).toBe(0);
    const sentByFirst = await sentCount(ids);
    expect(sentByFirst).toBeLessThan(ids.length);
    // The sink parses what it accepted one message after another: wait for it to catch up.
    await waitUntil(async () => recipients('term').length >= sentByFirst, 20_000);
    expect(recipients('term')).toHaveLength(sentByFirst);
    // The rest is picked up by the next worker: every invoice emailed exactly once.
    const next = await startWorker(fx.env.config({ SMTP_URL: sink.url }));
    cleanups.push(() => next.close());
    await waitUntil(async () => (await sentCount(ids)) === ids.length, 60_000);
    // The sink parses a message after the SMTP server accepted it: wait for it to have them all.
    await waitUntil(async () => new Set(recipients('term')).size === ids.length, 10_000);
    expect(recipients('term')).toHaveLength(ids.length);
  }, 120_000);

  it('the same signal twice at once (process-group delivery) is one graceful shutdown, exit 0', async () => {
    const worker = spawned({ WORKER_CONCURRENCY: '2', SHUTDOWN_TIMEOUT_MS: '20000' });
    await worker.waitForLine((l) => l.msg === 'worker started');
    const ids = await sendInvoices(4, 'twice');
    await waitUntil(async () => (await activeSends()) > 0, 30_000);
    worker.child.kill('SIGTERM');
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(worker.lines.filter((l) => l.includes('"msg":"shutting down"'))).toHaveLength(1);
    expect(worker.lines.some((l) => l.includes('second signal'))).toBe(false);
    expect(worker.lines.some((l) => l.includes('shut down cleanly'))).toBe(true);
    expect(await activeSends()).toBe(0);
    const sent = await sentCount(ids);
    await waitUntil(async () => recipients('twice').length >= sent, 20_000);
    expect(recipients('twice')).toHaveLength(sent);
  }, 60_000);
});

describe('a signal during start-up', () => {
  const msgOf = (l: string): string | null => {
    try {
      return (JSON.parse(l) as { msg?: string }).msg ?? null;
    } catch {
      return null;
    }
  };
  /** Exit 0 by its own hand after a drain: never ended by the signal (the exit code null). */
  async function expectCleanExit(p: WorkerProcess, stage: string): Promise<void> {
    const code = await p.exited;
    expect({ stage, code, signal: p.child.signalCode }, p.lines.slice(-8).join('\n')).toEqual({ stage, code: 0, signal: null });
    expect(p.lines.some((l) => msgOf(l) === 'shut down cleanly'), stage).toBe(true);
    expect(p.lines.filter((l) => l.startsWith('stderr: ')), stage).toEqual([]);
  }

  it('SIGTERM after each line a worker writes while it starts, and right after "worker started": exit 0 after a drain, never a death by the signal', async () => {
    // The stages: every line a start writes, up to and including "worker started".
    const first = spawned();
    await first.waitForLine((l) => l.msg === 'worker started');
    const upTo = first.lines.findIndex((l) => msgOf(l) === 'worker started');
    // A line's message without its numbers ("Server listening at http://127.0.0.1:<port>").
    const stageOf = (l: Record<string, unknown>) => String(l.msg).replace(/\d+/g, 'N');
    const stages = first.lines
      .slice(0, upTo + 1)
      .map((l) => (msgOf(l) === null ? null : stageOf(JSON.parse(l) as Record<string, unknown>)))
      .filter((m): m is string => m !== null);
    expect(stages.at(-1)).toBe('worker started');
    expect(await first.stop()).toBe(0);
    // "worker started" is the line a supervisor (or a test) signals after: again, for the window
    // right behind it.
    for (const stage of [...stages, 'worker started', 'worker started']) {
      const p = spawned();
      await p.waitForLine((l) => stageOf(l) === stage);
      p.child.kill('SIGTERM');
      await expectCleanExit(p, stage);
    }
  }, 180_000);

  // Found by a newcomer's walk: Ctrl-C while `npm start` started still started everything, printed
  // "Ready." and then shut down.
  it('npm start signalled while it migrates: starts nothing more, announces nothing, exits 0 after closing what it opened', async () => {
    const p = spawned({ LOG_LEVEL: 'debug', PORT: String(await freePort()), METRICS_PORT: '0', WORKER_PORT: '0' }, { command: 'start' });
    await p.waitForLine((l) => typeof l.msg === 'string' && /migration/i.test(l.msg));
    p.child.kill('SIGTERM');
    await expectCleanExit(p, 'migrating');
    expect(p.lines.filter((l) => msgOf(l) === 'ready')).toEqual([]);
  }, 60_000);

  it('SIGTERM right after the spawn: exit 0, or, when it lands before node runs any code of the service, the end of a process that wrote and took nothing', async () => {
    for (let i = 0; i < 3; i++) {
      const p = spawned();
      await new Promise((r) => p.child.once('spawn', r));
      p.child.kill('SIGTERM');
      const code = await p.exited;
      if (code === null) expect(p.lines, 'ended by the signal after writing').toEqual([]);
      else await expectCleanExit(p, 'spawn');
    }
  }, 120_000);

  it('SIGTERM while it waits for an unreachable Redis: exit 0 within SHUTDOWN_TIMEOUT_MS of the signal, having taken nothing', async () => {
    const closed = await freePort();
    const p = spawned({ QUEUE_BACKEND: 'redis', REDIS_URL: `redis://127.0.0.1:${closed}`, SHUTDOWN_TIMEOUT_MS: '1000' });
    await p.waitForLine((l) => l.msg === 'cannot check the Redis prefix claim yet (Redis or Postgres unreachable); retrying', 30_000);
    p.child.kill('SIGTERM');
    const code = await p.exited;
    expect({ code, signal: p.child.signalCode }, p.lines.slice(-5).join('\n')).toEqual({ code: 0, signal: null });
    expect(p.lines.some((l) => msgOf(l) === 'still starting at SHUTDOWN_TIMEOUT_MS after the signal; exiting')).toBe(true);
    expect(p.lines.some((l) => msgOf(l) === 'worker started')).toBe(false);
  }, 60_000);
});

describe('ports on a shared host', () => {
  function hold(port: number): Promise<Server | null> {
    return new Promise((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(null));
      s.listen(port, '0.0.0.0', () => resolve(s));
    });
  }

  it('WORKER_PORT unset and 3001 taken: the worker takes another free port and says which', async () => {
    // Held by this test, or already by something else on the machine: taken either way.
    const held = await hold(3001);
    cleanups.push(() => new Promise((r) => (held ? held.close(r) : r(undefined))));
    const env = processEnv();
    delete env.WORKER_PORT;
    const p = spawnWorker(env, { compiled: build.cli });
    cleanups.push(() => p.stop('SIGKILL'));
    const started = await p.waitForLine((l) => l.msg === 'worker started');
    const port = started.port as number;
    expect(port).not.toBe(3001);
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    expect(await p.stop('SIGTERM')).toBe(0);
  }, 60_000);

  it('WORKER_PORT set and taken: exit 1 with one line naming WORKER_PORT', async () => {
    const held = (await hold(0))!;
    cleanups.push(() => new Promise((r) => held.close(r)));
    const port = (held.address() as { port: number }).port;
    const p = spawned({ WORKER_PORT: String(port), LOG_LEVEL: 'warn' });
    expect(await p.exited).toBe(1);
    const stderr = p.lines.filter((l) => l.startsWith('stderr: ')).join('').replace(/^stderr: /, '');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('WORKER_PORT');
    expect(stderr).toContain(String(port));
    expect(stderr).toContain('or leave it unset for any free port');
    expect(stderr).not.toMatch(/\n\s+at /);
  }, 60_000);

  it('PORT taken: the API exits 1 with one line naming PORT, without advice that does not hold for it', async () => {
    const held = (await hold(0))!;
    cleanups.push(() => new Promise((r) => held.close(r)));
    const port = (held.address() as { port: number }).port;
    const p = spawned({ PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'warn' }, { command: 'api' });
    expect(await p.exited).toBe(1);
    const stderr = p.lines.filter((l) => l.startsWith('stderr: ')).join('').replace(/^stderr: /, '');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain(`PORT: port ${port}`);
    // PORT never moves on its own (a load balancer points at it): no "leave it unset" here.
    expect(stderr).not.toContain('leave it unset');
  }, 60_000);
});
