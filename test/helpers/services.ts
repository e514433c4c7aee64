// Which Postgres and Redis the tests use, in this order:
//  1. TEST_DATABASE_URL / TEST_REDIS_URL, else DATABASE_URL / REDIS_URL (CI sets these);
//  2. containers started with testcontainers, when a container runtime answers;
//  3. the local defaults (127.0.0.1:5432, 127.0.0.1:6379), when they answer;
//  4. Postgres (or with TEST_DATABASE_URL=embedded): an embedded PostgreSQL (the service's own, see src/runtime/embedded-postgres.ts) in
//     a temporary folder, removed afterwards. Redis: a throwaway `redis-server` on a free loopback
//     port when the binary is on the PATH, else null (the Redis-backend runs are then left out;
//     see redis-availability.ts).
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/log.js';
import { freePort } from '../../src/lib/free-port.js';
import { useEmbeddedPostgres } from '../../src/runtime/embedded-postgres.js';

export interface Services {
  databaseUrl: string;
  redisUrl: string | null;
  /** Where each came from, for the one line a test run prints. */
  origin: { database: string; redis: string };
  stop(): Promise<void>;
}

export const LOCAL_PG = 'postgres://postgres@127.0.0.1:5432/postgres';
export const LOCAL_REDIS = 'redis://127.0.0.1:6379';

export function answers(url: string, fallbackPort: number): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname, port: Number(u.port || fallbackPort) });
    socket.setTimeout(1_000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export async function containerRuntimeAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** The path of `redis-server` when it is on the PATH. */
export function redisServerBinary(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() ? found.stdout.trim() : null;
}

/** A throwaway Redis without persistence (`--hz 100`, as in compose: delayed jobs on time). */
async function startRedisServer(binary: string): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--hz', '100'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  while (!(await answers(url, port))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    url,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export async function resolveServices(env: NodeJS.ProcessEnv = process.env): Promise<Services> {
  // TEST_DATABASE_URL=embedded asks for the embedded PostgreSQL even when another answers.
  const forceEmbedded = env.TEST_DATABASE_URL === 'embedded';
  let databaseUrl = forceEmbedded ? null : env.TEST_DATABASE_URL || env.DATABASE_URL || null;
  let redisUrl = env.TEST_REDIS_URL || env.REDIS_URL || null;
  const origin = {
    database: env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : env.DATABASE_URL ? 'DATABASE_URL' : '',
    redis: env.TEST_REDIS_URL ? 'TEST_REDIS_URL' : env.REDIS_URL ? 'REDIS_URL' : '',
  };
  const stops: (() => Promise<unknown>)[] = [];
  if ((!databaseUrl || !redisUrl) && (await containerRuntimeAnswers())) {
    if (!databaseUrl && !forceEmbedded) {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const pg = await new PostgreSqlContainer('postgres:15-alpine').start();
      databaseUrl = pg.getConnectionUri();
      origin.database = 'testcontainers';
      stops.push(() => pg.stop());
    }
    if (!redisUrl) {
      const { RedisContainer } = await import('@testcontainers/redis');
      const redis = await new RedisContainer('redis:7-alpine').withCommand(['redis-server', '--hz', '100']).start();
      redisUrl = redis.getConnectionUrl();
      origin.redis = 'testcontainers';
      stops.push(() => redis.stop());
    }
  }
  if (!databaseUrl && !forceEmbedded && (await answers(LOCAL_PG, 5432))) [databaseUrl, origin.database] = [LOCAL_PG, 'local default'];
  if (!redisUrl && (await answers(LOCAL_REDIS, 6379))) [redisUrl, origin.redis] = [LOCAL_REDIS, 'local default'];
  if (!redisUrl) {
    const binary = redisServerBinary();
    if (binary !== null) {
      const server = await startRedisServer(binary);
      [redisUrl, origin.redis] = [server.url, `throwaway redis-server (${binary})`];
      stops.push(() => server.stop());
    }
  }
  if (!databaseUrl) {
    const dir = mkdtempSync(path.join(tmpdir(), 'invoice-test-pg-'));
    chmodSync(dir, 0o755); // as root the server runs as `postgres`, which must reach its data
    const server = await useEmbeddedPostgres(dir, 'own', createLogger('silent'));
    const url = new URL(server.url);
    url.pathname = '/postgres'; // the harness creates its databases from the maintenance one
    databaseUrl = url.toString();
    origin.database = `embedded PostgreSQL in ${dir}`;
    stops.push(async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    });
  }
  return { databaseUrl, redisUrl, origin, stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}
