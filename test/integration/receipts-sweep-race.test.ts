// The `invoice.receipts` job and the reconciler's sweep of stranded fan-out rows on the same row at
// once: they take the row and the receipts' keys in the same order (the row first), so neither
// deadlocks, and each receipt is owed once. A test-only trigger on deliveries, on for one session,
// holds the job inside its statement (after it took the row) while the sweep runs. (An adversarial
// review found the job's delete ran after its owing, the opposite order: 40P01.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oweFanOutReceipts, oweStrandedReceipts } from '../../src/db/outbox.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';
import { waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;
const api = apiClient(() => fx.api.app);

beforeAll(async () => {
  fx = await startApiFixture();
  await fx.api.pool.query(`create function test_hold_owing() returns trigger language plpgsql as $$
    begin if current_setting('test.hold_owing', true) = 'on' then perform pg_sleep(1.5); end if; return null; end $$`);
  await fx.api.pool.query('create trigger test_hold_owing after insert on deliveries for each row execute function test_hold_owing()');
});
afterAll(async () => {
  await fx?.close();
});

describe('the fan-out job and the sweep on the same stranded row', () => {
  it('neither fails: the job owes the receipt, the sweep skips the row it holds; one receipt', async () => {
    const created = await api.post('/v1/invoices', fx.merchant.keys.sandbox, { customer_email: 'sweep-race@example.test', amount: '12.00' });
    expect(created.status, created.raw).toBe(200);
    const id = created.body.data.id as string;
    const jobId = 'invoice.receipts-race-1';
    await fx.api.pool.query(
      `insert into outbox (job_name, job_id, payload, enqueued_at) values ('invoice.receipts', $1, $2, now() - interval '11 minutes')`,
      [jobId, JSON.stringify({ batchId: 'race-1', invoiceIds: [id] })],
    );
    const job = await fx.api.pool.connect();
    const sweep = await fx.api.pool.connect();
    try {
      await job.query(`set test.hold_owing = 'on'`);
      const pid = (await job.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      const jobDone = oweFanOutReceipts(job, jobId, [id]).then((n) => `job owed ${n}`, (e: { code?: string; message: string }) => `job failed ${e.code}: ${e.message}`);
      // The job is inside its statement, past its owing's first insert: it holds what it takes.
      await waitUntil(async () => (await fx.api.pool.query(`select 1 from pg_stat_activity where pid = $1 and wait_event = 'PgSleep'`, [pid])).rowCount === 1, 10_000, 20);
      const swept = await oweStrandedReceipts(sweep, 10 * 60_000, 20);
      expect(swept).toEqual({ rows: 0, owed: 0 });
      expect(await jobDone).toBe('job owed 1');
    } finally {
      job.release();
      sweep.release();
    }
    const owed = await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and invoice_id = $1`, [id]);
    expect(owed.rows[0].n).toBe(1);
    expect((await fx.api.pool.query('select 1 from outbox where job_id = $1', [jobId])).rowCount).toBe(0);
  }, 30_000);
});
