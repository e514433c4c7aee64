// The suite's Postgres container survives what a loaded Docker host does to it. A process
// orphaned in the container (a health check's shell killed on its timeout leaves its pg_isready)
// is adopted by the container's PID 1. Were that the postmaster, a child it reaps that died of a
// signal would count as a crashed backend: every session cut, crash recovery, and every test
// touching the database in those seconds failing ("the database system is in recovery mode").
// Runs only where the suite itself runs on containers (no TEST_DATABASE_URL).
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTAINER_LABEL, crashLines, DEFAULT_POSTGRES_IMAGE, planServices, postgresContainer, type Started } from '../helpers/services.js';
import { waitUntil } from '../helpers/worker.js';

const onContainers = (await planServices()).database.kind === 'container';

const inContainer = (id: string, ...args: string[]) => execFileSync('docker', ['exec', id, ...args], { encoding: 'utf8', timeout: 30_000 }).trim();
const alive = (id: string, pid: string) => {
  try {
    inContainer(id, 'test', '-e', `/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(!onContainers)("the tests' Postgres container", () => {
  let started: Started;
  let client: pg.Client;

  beforeAll(async () => {
    started = await postgresContainer(process.env.TEST_POSTGRES_IMAGE ?? DEFAULT_POSTGRES_IMAGE, { [CONTAINER_LABEL]: `${process.pid}-orphan-test` }, () => undefined);
    client = new pg.Client({ connectionString: started.url });
    // A session cut by a crash fails its next query; the client's own error event is not a second failure.
    client.on('error', () => undefined);
    await client.connect();
  }, 120_000);

  afterAll(async () => {
    await client?.end().catch(() => undefined);
    await started?.stop();
  });

  it('a process orphaned in it and killed by SIGPIPE is reaped by its init, not taken for a crashed backend: sessions go on', async () => {
    const id = started.containerId!;
    const before = (await client.query<{ t: Date }>('select pg_postmaster_start_time() as t')).rows[0].t;
    // The shell exits at once and leaves its background sleep to PID 1, as a health check's
    // shell killed by Docker leaves its pg_isready.
    const orphan = inContainer(id, 'sh', '-c', 'sleep 600 >/dev/null 2>&1 & echo $!');
    expect(orphan).toMatch(/^\d+$/);
    await waitUntil(async () => inContainer(id, 'sh', '-c', `cut -d' ' -f4 /proc/${orphan}/stat`) === '1', 10_000, 20);
    inContainer(id, 'sh', '-c', `kill -PIPE ${orphan}`);
    await waitUntil(async () => !alive(id, orphan), 10_000, 20);

    // The session opened before is still served by the same postmaster, which logged no crash.
    const after = await client.query<{ t: Date; one: number }>('select pg_postmaster_start_time() as t, 1 as one');
    expect(after.rows[0].one).toBe(1);
    expect(after.rows[0].t.getTime()).toBe(before.getTime());
    expect(crashLines(id)).toEqual([]);
    expect(inContainer(id, 'cat', '/proc/1/comm')).not.toBe('postgres');
  }, 60_000);
});
