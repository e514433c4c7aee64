// Period invoices made in batches (src/invoicing/subscription-period.ts, ensurePeriodInvoices):
// each batch's missing invoices in one transaction, each account and environment's invoice
// counter taken once. Two batches at once (the charge job's lanes, or two workers) spanning the
// same counters must take them in one order, or each waits for the other's.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, it } from 'vitest';
import { upsertCustomer } from '../../src/db/customers.js';
import { claimChargeWork } from '../../src/db/subscriptions.js';
import { ensurePeriodInvoices } from '../../src/invoicing/subscription-period.js';
import { useApiFixture } from '../helpers/http.js';
import { seedSubscription, type SeedSubscription } from '../helpers/subscriptions.js';
import { waitUntil } from '../helpers/worker.js';

const { fx, keys, call } = useApiFixture({ otherMerchant: false });
const addr = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
let base: Omit<SeedSubscription, 'startedAt' | 'intervalSeconds' | 'onchainId' | 'customerId' | 'environment'>;
const customers = { sandbox: '', live: '' };
let onchainIds = 0;

beforeAll(async () => {
  const product = await call('POST', '/v1/products', keys.sandbox, { name: 'Gold plan', prices: [{ amount: '9.99', cadence: 'monthly' }] });
  expect(product.status, product.raw).toBe(200);
  const price = product.body.data.prices[0];
  for (const environment of ['sandbox', 'live'] as const) {
    customers[environment] = (await upsertCustomer(fx.api.pool, { accountId: fx.merchant.accountId, environment }, `subscriber-${environment}@example.test`, null, null, null)).id;
  }
  base = {
    accountId: fx.merchant.accountId,
    priceId: price.id,
    chainId: price.chain_id,
    network: price.network,
    contract: addr(),
    subscriber: addr(),
    payee: addr(),
    token: addr(),
    feeAddress: addr(),
    operator: addr(),
    amount: '9.99',
    amountAtomic: '9990000',
    feeBps: 50,
  };
});

const seed = (environment: 'sandbox' | 'live') =>
  seedSubscription(fx.api.pool, {
    ...base,
    environment,
    customerId: customers[environment],
    onchainId: String(++onchainIds),
    intervalSeconds: 60,
    startedAt: new Date(Date.now() - 61_000),
  });

describe('period invoices of two batches at once', () => {
  it('batches spanning the sandbox and live counters in opposite orders: each made in its one transaction, no deadlock between them', async () => {
    const [s1, l1, s2, l2] = [await seed('sandbox'), await seed('live'), await seed('sandbox'), await seed('live')];
    const claimed = new Map((await claimChargeWork(fx.api.pool, 10, 60_000)).map((w) => [w.id, w]));
    const batch = (...ids: string[]) => ids.map((id) => ({ sub: claimed.get(id)!, k: 1 }));
    const first = batch(s1, l1);
    const second = batch(l2, s2);
    for (const { sub } of [...first, ...second]) expect(sub).toBeDefined();

    // Both counters held by a third transaction while both batches reach them: when it lets go,
    // each batch takes the counter it asks for first, then asks for the other.
    const blocker = await fx.api.pool.connect();
    let made: Awaited<ReturnType<typeof ensurePeriodInvoices>>[];
    try {
      await blocker.query('begin');
      for (const environment of ['sandbox', 'live']) {
        await blocker.query(
          `insert into invoice_counters (account_id, environment, last_number) values ($1, $2, 0)
           on conflict (account_id, environment) do update set last_number = invoice_counters.last_number`,
          [fx.merchant.accountId, environment],
        );
      }
      const both = Promise.all([ensurePeriodInvoices(fx.api.pool, first), ensurePeriodInvoices(fx.api.pool, second)]);
      await waitUntil(async () => {
        const { rows } = await fx.api.pool.query<{ n: number }>(
          `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
           where not l.granted and a.datname = current_database() and a.query like '%invoice_counters%'`,
        );
        return rows[0].n === 2;
      });
      await blocker.query('commit');
      made = await both;
    } finally {
      blocker.release();
    }
    for (const [i, m] of made.entries()) {
      expect([...m.failed.keys()], `batch ${i}`).toEqual([]);
      const ids = [...m.invoices.values()].map((inv) => inv.id);
      expect(ids).toHaveLength(2);
      // One transaction made (and issued) the batch's invoices: their rows carry its id.
      const { rows } = await fx.api.pool.query<{ xmin: string }>('select xmin::text from invoices where id = any($1::text[])', [ids]);
      expect(new Set(rows.map((r) => r.xmin)).size, `batch ${i} made in one transaction`).toBe(1);
    }
  });
});
