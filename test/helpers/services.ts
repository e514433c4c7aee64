// Which Postgres and Redis the tests use, in this order:
//  1. TEST_DATABASE_URL / TEST_REDIS_URL, else DATABASE_URL / REDIS_URL (CI sets these);
//  2. containers started with testcontainers, when a container runtime answers;
//  3. the local defaults (127.0.0.1:5432, 127.0.0.1:6379), when they answer;
//  else stop at once with one message saying what to set.
import net from 'node:net';

export interface Services {
  databaseUrl: string;
  redisUrl: string;
  /** Where each came from, for the one line a test run prints. */
  origin: { database: string; redis: string };
  stop(): Promise<void>;
}

const LOCAL_PG = 'postgres://postgres@127.0.0.1:5432/postgres';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

function answers(url: string, fallbackPort: number): Promise<boolean> {
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

async function containerRuntimeAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

export async function resolveServices(env: NodeJS.ProcessEnv = process.env): Promise<Services> {
  let databaseUrl = env.TEST_DATABASE_URL || env.DATABASE_URL || null;
  let redisUrl = env.TEST_REDIS_URL || env.REDIS_URL || null;
  const origin = {
    database: env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : env.DATABASE_URL ? 'DATABASE_URL' : '',
    redis: env.TEST_REDIS_URL ? 'TEST_REDIS_URL' : env.REDIS_URL ? 'REDIS_URL' : '',
  };
  const stops: (() => Promise<unknown>)[] = [];
  if ((!databaseUrl || !redisUrl) && (await containerRuntimeAnswers())) {
    if (!databaseUrl) {
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
  if (!databaseUrl && (await answers(LOCAL_PG, 5432))) [databaseUrl, origin.database] = [LOCAL_PG, 'local default'];
  if (!redisUrl && (await answers(LOCAL_REDIS, 6379))) [redisUrl, origin.redis] = [LOCAL_REDIS, 'local default'];
  if (!databaseUrl || !redisUrl) {
    throw new Error(
      'No Postgres/Redis for the tests: start Docker (testcontainers), or set TEST_DATABASE_URL and TEST_REDIS_URL ' +
        '(e.g. postgres://postgres@127.0.0.1:5432/postgres and redis://127.0.0.1:6379).',
    );
  }
  return { databaseUrl, redisUrl, origin, stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}
