// A transaction whose session the server ends while it waits between queries (a failover, an idle
// timeout, pg_terminate_backend) while fn awaits a node or a lock: the checked-out client emits
// 'error' with no pool listener; unhandled, that is an uncaught exception that kills the worker.
// withTransaction (src/db/pool.ts) listens while it holds the client: the transaction fails, the
// process lives, the pool hands out a working client next.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withSnapshot, withTransaction } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../helpers/context.js';

let db: TestDatabase;
let pool: pg.Pool;
let admin: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  admin = new pg.Pool({ connectionString: db.url, max: 1 });
});
afterAll(async () => {
  await pool?.end();
  await admin?.end();
  await db?.drop();
});

async function waitGone(pid: number): Promise<void> {
  for (;;) {
    const { rowCount } = await admin.query('select 1 from pg_stat_activity where pid = $1', [pid]);
    if (rowCount === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a transaction whose session the server ends between its queries', () => {
  for (const [name, run] of [
    ['withTransaction', withTransaction],
    ['withSnapshot', withSnapshot],
  ] as const) {
    it(`${name}: fails with the server's error, nothing committed, the process alive, the next transaction works`, async () => {
      await admin.query('create table if not exists session_lost (n int)');
      const uncaught: unknown[] = [];
      const onUncaught = (err: unknown) => uncaught.push(err);
      process.on('uncaughtException', onUncaught);
      try {
        const outcome = await run(pool, async (client) => {
          const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
          if (name === 'withTransaction') await client.query('insert into session_lost values (1)');
          // The session ends while fn is elsewhere (no query in flight): the client's 'error' event.
          await admin.query('select pg_terminate_backend($1)', [rows[0].pid]);
          await waitGone(rows[0].pid);
          await new Promise((r) => setImmediate(r));
          await client.query('select 1');
          return 'committed';
        }).then(
          (v) => ({ ok: true as const, v }),
          (err: unknown) => ({ ok: false as const, err }),
        );
        expect(outcome.ok).toBe(false);
        expect(uncaught).toEqual([]);
        expect((await admin.query('select count(*)::int as n from session_lost')).rows[0].n).toBe(0);
        // The broken client was closed, not pooled: the next transactions get live sessions.
        for (let i = 0; i < 3; i++) expect(await withTransaction(pool, async (c) => (await c.query<{ one: number }>('select 1 as one')).rows[0].one)).toBe(1);
      } finally {
        process.off('uncaughtException', onUncaught);
      }
    });
  }
});
