// The fee an invoice's applied payments counted, as the payment rules read it under the invoice's
// row lock (src/db/payments.ts lockPayableInvoice): a payment applied by a transaction that held the
// lock while this one waited must be seen. Read inside the locking statement it was not (that
// statement's snapshot predates the wait), leaving room for a second full fee (issue 24 review, L4).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockPayableInvoice } from '../../src/db/payments.js';
import { newId } from '../../src/domain/ids.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';

let fx: ApiFixture;
const api = apiClient(() => fx.api.app);

beforeAll(async () => {
  fx = await startApiFixture();
});
afterAll(async () => {
  await fx?.close();
});

describe('the fee counted, read under the invoice lock', () => {
  it('sees the fee of a payment applied by the transaction it waited for', async () => {
    const created = await api.post('/v1/invoices', fx.merchant.keys.sandbox, { customer_email: 'race@example.test', amount: '10' });
    expect(created.status, created.raw).toBe(200);
    const invoiceId: string = created.body.data.id;
    const scope = { accountId: fx.merchant.accountId, environment: 'sandbox' as const };
    const first = await fx.api.pool.connect();
    const second = await fx.api.pool.connect();
    try {
      await first.query('begin');
      await first.query('select 1 from invoices where id = $1 for update', [invoiceId]);
      // An applied payment whose count holds 10 atomic units of fee (counted 100 of which 90 received).
      await first.query(
        `insert into payments (id, account_id, environment, invoice_id, chain_id, network, tx_hash, log_index, tx_position, block_number, block_hash,
           token_address, to_address, amount_atomic, fee_atomic, received_atomic, fee_received_atomic, counted_atomic, kind, status, outcome, confirmed_at)
         select $1, i.account_id, i.environment, i.id, 84532, 'base-sepolia', $2, 0, 'proxy:0', 1, $3,
           '0x036CbD53842c5426634e7929541eC8318f3dCF7e', '0x2222222222222222222222222222222222222222', 90, 10, 90, 10, 100, 'proxy', 'confirmed', 'applied', now()
         from invoices i where i.id = $4`,
        [newId('pay'), `0x${'ab'.repeat(32)}`, `0x${'00'.repeat(32)}`, invoiceId],
      );
      await second.query('begin');
      // Asked by its pid: the locking statement's text is longer than pg_stat_activity keeps (1 kB).
      const secondPid = (await second.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      const waiting = lockPayableInvoice(second, scope, invoiceId);
      // The second transaction is waiting for the row lock: only then does the first commit.
      await expect.poll(async () => {
        const { rows } = await fx.api.pool.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where pid = $1 and cardinality(pg_blocking_pids(pid)) > 0`,
          [secondPid],
        );
        return rows[0].n;
      }, { timeout: 10_000 }).toBe(1);
      await first.query('commit');
      const locked = await waiting;
      expect(locked?.fee_counted_atomic).toBe('10');
      await second.query('rollback');
    } finally {
      first.release();
      second.release();
    }
  });
});
