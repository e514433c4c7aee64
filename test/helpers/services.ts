// Which Postgres and Redis the tests use. Each is named by its variable, else started in a container:
//  - Postgres: TEST_DATABASE_URL (a URL; or `embedded`: the service's own embedded PostgreSQL, see
//    src/runtime/embedded-postgres.ts, in a temporary folder), else a container of
//    TEST_POSTGRES_IMAGE (default postgres:15, the version docker-compose.yml runs in production);
//  - Redis: TEST_REDIS_URL, else a container of TEST_REDIS_IMAGE (default redis:7).
// The containers are started by testcontainers once per run (global-setup.ts) and stopped at its
// end. Nothing is found by chance: whatever listens on 5432 or 6379 is used only when a variable
// names it. No Postgres to be had (no TEST_DATABASE_URL, no container runtime): the run stops at
// once with one line saying what to install or set (vitest.config.ts). No Redis: the Redis-backend
// project is left out, said in one line.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/log.js';
import { useEmbeddedPostgres } from '../../src/runtime/embedded-postgres.js';

/** The images a developer machine pulls: production's PostgreSQL (docker-compose.yml) and Redis. */
export const DEFAULT_POSTGRES_IMAGE = 'postgres:15';
export const DEFAULT_REDIS_IMAGE = 'redis:7';
/** Marks this suite's containers: `docker ps --filter label=invoice-lifecycle.tests`. Its value is `<host name>/<pid>` of the run. */
export const CONTAINER_LABEL = 'invoice-lifecycle.tests';
/** The owner of this run's containers: the pid alone could be another machine's, on a shared Docker. */
const OWNER = `${hostname()}/${process.pid}`;

export type DatabaseSource = { kind: 'url'; url: string } | { kind: 'embedded' } | { kind: 'container'; image: string };
export type RedisSource = { kind: 'url'; url: string } | { kind: 'container'; image: string } | { kind: 'none'; why: string };
export interface ServicesPlan {
  database: DatabaseSource;
  redis: RedisSource;
}

export interface Services {
  databaseUrl: string;
  redisUrl: string | null;
  /** Where each came from, for the one line a test run prints. */
  origin: { database: string; redis: string };
  stop(): Promise<void>;
}

/** Why the run cannot start: one line, printed as is (vitest.config.ts), then exit 1. */
export class ServicesUnavailable extends Error {}

export const NO_POSTGRES =
  'tests need PostgreSQL and Redis: install Docker and start it (containers are started for you; without registry access build the images first: npm run test:images), or set TEST_DATABASE_URL and TEST_REDIS_URL (TEST_DATABASE_URL=embedded: an embedded PostgreSQL)';

/**
 * testcontainers' settings for this suite, each only when unset (read by testcontainers when it
 * first connects, so before any container call):
 *  - TESTCONTAINERS_RYUK_DISABLED=true: Ryuk, the reaper that removes containers of a killed run, is
 *    an image pulled from Docker Hub, unreachable on machines without registry access; the global
 *    set-up stops its containers itself, and removes those a killed run left (removeOrphans).
 *  - TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1: inside a container (a /.dockerenv, as on CI machines)
 *    testcontainers dials the bridge's gateway, but the ports are published on loopback
 *    (`dockerd --ip=127.0.0.1`, and Docker Desktop's localhost).
 */
export function containerDefaults(env: NodeJS.ProcessEnv = process.env): void {
  env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
  env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
}

export async function containerRuntimeAnswers(): Promise<boolean> {
  containerDefaults();
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/**
 * Decides where Postgres and Redis come from, from the variables alone (the container runtime is
 * asked only when a variable is missing). Throws ServicesUnavailable when there is no Postgres.
 */
export async function planServices(env: NodeJS.ProcessEnv = process.env, runtimeAnswers: () => Promise<boolean> = containerRuntimeAnswers): Promise<ServicesPlan> {
  let runtime: boolean | undefined;
  const docker = async () => (runtime ??= await runtimeAnswers());
  const database = async (): Promise<DatabaseSource> => {
    if (env.TEST_DATABASE_URL === 'embedded') return { kind: 'embedded' };
    if (env.TEST_DATABASE_URL) return { kind: 'url', url: env.TEST_DATABASE_URL };
    if (await docker()) return { kind: 'container', image: env.TEST_POSTGRES_IMAGE || DEFAULT_POSTGRES_IMAGE };
    throw new ServicesUnavailable(NO_POSTGRES);
  };
  const redis: RedisSource = env.TEST_REDIS_URL
    ? { kind: 'url', url: env.TEST_REDIS_URL }
    : (await docker())
      ? { kind: 'container', image: env.TEST_REDIS_IMAGE || DEFAULT_REDIS_IMAGE }
      : { kind: 'none', why: 'TEST_REDIS_URL unset and no container runtime answers (install Docker, or set TEST_REDIS_URL)' };
  return { database: await database(), redis };
}

/** True when the process of that pid is gone (a run killed before its teardown). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Removes this suite's containers whose run died without its teardown (what Ryuk would have done). */
async function removeOrphans(): Promise<string[]> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  const client = await getContainerRuntimeClient();
  const orphans = (await client.container.list()).filter((c) => {
    const [host, pid] = (c.Labels[CONTAINER_LABEL] ?? '').split('/');
    return host === hostname() && Number(pid) > 0 && gone(Number(pid));
  });
  await Promise.all(orphans.map((c) => client.container.getById(c.Id).remove({ force: true, v: true })));
  return orphans.map((c) => c.Id.slice(0, 12));
}

/** Says which image failed and what to do when it is missing and cannot be pulled. */
function startFailure(image: string, variable: string, error: unknown): ServicesUnavailable {
  const message = error instanceof Error ? error.message.split('\n')[0].trim() : String(error);
  return new ServicesUnavailable(
    `tests: could not start a container of ${image} (${variable}): ${message}. Without registry access build it locally: npm run test:images`,
  );
}

/** A service ready to use: its URL, where it came from (for the run's one line), how to stop it. */
export interface Started {
  url: string;
  origin: string;
  /** The container's full id, when it is one. */
  containerId?: string;
  stop(): Promise<void>;
}

type Say = (line: string) => void;

const named = (url: string, variable: string): Started => ({ url, origin: variable, stop: async () => {} });

/** The harness creates its databases from the maintenance database. */
function maintenance(url: string): string {
  const u = new URL(url);
  u.pathname = '/postgres';
  return u.toString();
}

/**
 * What the server logged about a backend that died: PostgreSQL then ends every session and replays
 * its WAL, and every test using it at that moment fails with "the database system is in recovery
 * mode". Said at the end of the run, so such a failure comes with its cause.
 */
export function crashLines(containerId: string): string[] {
  const out = spawnSync('docker', ['logs', containerId], { encoding: 'utf8', timeout: 15_000, maxBuffer: 64 * 1024 * 1024 });
  return `${out.stdout ?? ''}${out.stderr ?? ''}`
    .split('\n')
    .filter((l) => /terminated by signal|was terminated by|terminating any other active server processes|database system was interrupted|out of memory/i.test(l))
    .slice(0, 20);
}

/** A Postgres container as the suite starts it (exported for test/integration/test-postgres-container.test.ts). */
export async function postgresContainer(image: string, labels: Record<string, string>, say: Say): Promise<Started> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const { Wait } = await import('testcontainers');
  // PID 1 of the container is Docker's init (`docker run --init`: tini), not the postmaster. A
  // process orphaned in the container is adopted by PID 1; the postmaster takes any child it
  // reaps that died of a signal for a crashed backend and restarts every session (crash
  // recovery). That is what failed CI runs ("server process (PID n) was terminated by signal 13:
  // Broken pipe", then "database system was interrupted"): the module's health check, a shell
  // running pg_isready every 250 ms with a 1 s timeout, timed out on a loaded machine; Docker
  // killed the shell, and the orphaned pg_isready died of SIGPIPE writing to the closed pipe.
  // test/integration/test-postgres-container.test.ts orphans a process and kills it the same way.
  class PostgresUnderInit extends PostgreSqlContainer {
    constructor(name: string) {
      super(name);
      this.hostConfig.Init = true;
    }
  }
  try {
    // The official image's and the local one's entrypoint both take `postgres -c ...`. Durability
    // only costs time here: the data goes with the container. Docker's /dev/shm is 64 MB, where
    // PostgreSQL keeps its dynamic shared memory (parallel queries, the statistics of every
    // database the suite creates): room for all of them. Ready when pg_isready answers over TCP
    // (both entrypoints create the database on a server without TCP first); the health check,
    // no longer awaited, runs without a shell and once a minute instead of four times a second
    // for the whole run. The data directory is a tmpfs: the server never waits on the disk, which a
    // loaded machine's other writers can hold for seconds (under 200 MB are ever kept; the cap
    // leaves room for the WAL between checkpoints).
    const container = await new PostgresUnderInit(image)
      .withLabels(labels)
      .withSharedMemorySize(1024 * 1024 * 1024)
      .withTmpFs({ '/var/lib/postgresql/data': 'rw,size=8g' })
      .withHealthCheck({ test: ['CMD', 'pg_isready', '--host', 'localhost'], interval: 60_000, timeout: 10_000, retries: 3 })
      .withWaitStrategy(Wait.forSuccessfulCommand('pg_isready --host localhost').withStartupTimeout(120_000))
      .withCommand(['postgres', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'])
      .start();
    const id = container.getId().slice(0, 12);
    return {
      url: maintenance(container.getConnectionUri()),
      origin: `container ${id} of ${image}`,
      containerId: container.getId(),
      stop: async () => {
        for (const line of crashLines(container.getId())) say(`tests: the Postgres container ${id} logged: ${line}`);
        await container.stop();
        say(`tests: stopped the Postgres container ${id}`);
      },
    };
  } catch (error) {
    throw startFailure(image, 'TEST_POSTGRES_IMAGE', error);
  }
}

async function redisContainer(image: string, labels: Record<string, string>, say: Say): Promise<Started> {
  const { RedisContainer } = await import('@testcontainers/redis');
  try {
    // --hz 100 as in compose (delayed jobs on time); no persistence.
    const container = await new RedisContainer(image)
      .withLabels(labels)
      .withCommand(['redis-server', '--hz', '100', '--save', '', '--appendonly', 'no'])
      .start();
    const id = container.getId().slice(0, 12);
    return {
      url: container.getConnectionUrl(),
      origin: `container ${id} of ${image}`,
      containerId: container.getId(),
      stop: async () => {
        await container.stop();
        say(`tests: stopped the Redis container ${id}`);
      },
    };
  } catch (error) {
    throw startFailure(image, 'TEST_REDIS_IMAGE', error);
  }
}

async function embeddedPostgres(): Promise<Started> {
  const dir = mkdtempSync(path.join(tmpdir(), 'invoice-test-pg-'));
  chmodSync(dir, 0o755); // as root the server runs as `postgres`, which must reach its data
  const server = await useEmbeddedPostgres(dir, 'own', createLogger('silent'));
  return {
    url: maintenance(server.url),
    origin: `embedded PostgreSQL in ${dir}`,
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts (or names) what the plan says; `stop()` stops what was started, and says so. */
export async function startServices(plan: ServicesPlan, say: Say = (line) => process.stdout.write(`${line}\n`)): Promise<Services> {
  const { database, redis } = plan;
  if (database.kind === 'container' || redis.kind === 'container') {
    containerDefaults();
    const removed = await removeOrphans();
    if (removed.length) say(`tests: removed containers left by killed runs: ${removed.join(', ')}`);
  }
  const labels = { [CONTAINER_LABEL]: OWNER };
  // Both at once: each is ready in about a second, creating them is most of the wait.
  const [pg, rd] = await Promise.allSettled([
    database.kind === 'container' ? postgresContainer(database.image, labels, say) : database.kind === 'embedded' ? embeddedPostgres() : named(database.url, 'TEST_DATABASE_URL'),
    redis.kind === 'container' ? redisContainer(redis.image, labels, say) : redis.kind === 'url' ? named(redis.url, 'TEST_REDIS_URL') : null,
  ]);
  if (pg.status === 'rejected' || rd.status === 'rejected') {
    // The other one may have started: it is not left running.
    await Promise.allSettled([pg, rd].flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value.stop()] : [])));
    throw pg.status === 'rejected' ? pg.reason : rd.status === 'rejected' ? rd.reason : null;
  }
  const started = [pg.value, ...(rd.value ? [rd.value] : [])];
  // Ctrl-C or SIGTERM ends vitest without its teardown: the containers go with the process, through
  // the docker CLI (a signal or exit handler cannot wait for the API). The signal is then raised
  // again, so the process ends as it would have. A SIGKILLed run leaves them to the next run's
  // removeOrphans.
  const containerIds = started.flatMap((s) => (s.containerId ? [s.containerId] : []));
  let removed = false;
  const removeNow = () => {
    if (removed || !containerIds.length) return;
    removed = true;
    spawnSync('docker', ['rm', '--force', '--volumes', ...containerIds], { stdio: 'ignore', timeout: 15_000 });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    removeNow();
    process.kill(process.pid, signal);
  };
  const unhook = () => {
    process.off('exit', removeNow);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  if (containerIds.length) {
    process.once('exit', removeNow);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
  return {
    databaseUrl: pg.value.url,
    redisUrl: rd.value?.url ?? null,
    origin: { database: pg.value.origin, redis: rd.value?.origin ?? (redis.kind === 'none' ? redis.why : '') },
    stop: async () => {
      unhook();
      await Promise.all(started.map((s) => s.stop()));
    },
  };
}
