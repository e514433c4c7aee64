// Period invoices made in batches (src/invoicing/subscription-period.ts, ensurePeriodInvoices):
// each batch's missing invoices in one transaction, each account and environment's invoice
// counter taken once. Two batches at once (the charge job's lanes, or two workers) spanning the
// same counters must take them in one order, or each waits for the other's.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, it } from 'vitest';
import { upsertCustomer } from '../../src/db/customers.js';
import { recordChargesSent } from '../../src/db/invoices.js';
import { claimChargeWork, releaseWorks } from '../../src/db/subscriptions.js';
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

/** Waits until `write` has settled, or its statement (its text like `pattern`) waits on a row lock. */
async function untilSettledOrWaitingOnLock(write: Promise<unknown>, pattern: string): Promise<void> {
  let settled = false;
  void write.then(() => (settled = true));
  await waitUntil(async () => {
    if (settled) return true;
    const { rows } = await fx.api.pool.query<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like $1`,
      [pattern],
    );
    return rows[0].n === 1;
  });
}

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

describe('the sent charges of a batch recorded at once', () => {
  // The watcher pays the invoices of a range of Charged logs in one transaction, one after the
  // other in log order (src/chain/detector.ts, recordRange); a burst of charges is mined while the
  // job records them sent. One statement taking the batch's invoice rows in an order of its own
  // and waiting for one the watcher holds, while the watcher waits for one it took: a deadlock.
  it('while a transaction paying two of the invoices holds one and then asks for the other: neither waits on the other for good', async () => {
    const [a, b] = [await seed('sandbox'), await seed('sandbox')];
    const claimed = new Map((await claimChargeWork(fx.api.pool, 10, 60_000)).map((w) => [w.id, w]));
    const made = await ensurePeriodInvoices(fx.api.pool, [a, b].map((id) => ({ sub: claimed.get(id)!, k: 1 })));
    const [invA, invB] = [made.invoices.get(a)!, made.invoices.get(b)!];
    const watcher = await fx.api.pool.connect();
    try {
      await watcher.query('begin');
      await watcher.query('update invoices set updated_at = now() where id = $1', [invB.id]);
      const recording = recordChargesSent(fx.api.pool, [
        { invoiceId: invA.id, txHash: `0x${'a'.repeat(64)}` },
        { invoiceId: invB.id, txHash: `0x${'b'.repeat(64)}` },
      ]).then(
        () => 'recorded',
        (err: unknown) => String(err),
      );
      await untilSettledOrWaitingOnLock(recording, '%charge_tx_hash%');
      const watcherAnswer = await watcher.query('update invoices set updated_at = now() where id = $1', [invA.id]).then(
        () => 'updated',
        (err: unknown) => String(err),
      );
      await watcher.query(watcherAnswer === 'updated' ? 'commit' : 'rollback');
      expect({ watcher: watcherAnswer, recording: await recording }).toEqual({ watcher: 'updated', recording: 'recorded' });
      // Both recorded: the one held once the holder let go.
      const { rows } = await fx.api.pool.query<{ id: string; charge_tx_hash: string | null }>('select id, charge_tx_hash from invoices where id = any($1::text[]) order by id', [[invA.id, invB.id]]);
      expect(Object.fromEntries(rows.map((r) => [r.id, r.charge_tx_hash]))).toEqual({ [invA.id]: `0x${'a'.repeat(64)}`, [invB.id]: `0x${'b'.repeat(64)}` });
    } finally {
      watcher.release();
    }
  });
});

describe('the leases of a batch moved at once', () => {
  // The same with the subscriptions: the watcher's transaction moves each paid period's
  // subscription on (the advance trigger) one after the other while the job moves the batch's leases.
  it('while a transaction holds one of the subscriptions and then asks for another: neither waits on the other for good', async () => {
    const [a, b] = [await seed('sandbox'), await seed('sandbox')];
    const claimed = new Map((await claimChargeWork(fx.api.pool, 10, 60_000)).map((w) => [w.id, w]));
    const later = new Date(Date.now() + 60_000);
    const watcher = await fx.api.pool.connect();
    try {
      await watcher.query('begin');
      await watcher.query('update subscriptions set updated_at = now() where id = $1', [b]);
      const releasing = releaseWorks(fx.api.pool, [a, b].map((id) => ({ id, lease: claimed.get(id)!.lease, at: later }))).then(
        () => 'released',
        (err: unknown) => String(err),
      );
      await untilSettledOrWaitingOnLock(releasing, '%set next_work_at%');
      const watcherAnswer = await watcher.query('update subscriptions set updated_at = now() where id = $1', [a]).then(
        () => 'updated',
        (err: unknown) => String(err),
      );
      await watcher.query(watcherAnswer === 'updated' ? 'commit' : 'rollback');
      expect({ watcher: watcherAnswer, releasing: await releasing }).toEqual({ watcher: 'updated', releasing: 'released' });
      // Both leases moved: the one held was released once the holder let go.
      const { rows } = await fx.api.pool.query<{ id: string; next_work_at: Date }>('select id, next_work_at from subscriptions where id = any($1::text[])', [[a, b]]);
      for (const r of rows) expect(r.next_work_at.getTime(), r.id).toBe(later.getTime());
    } finally {
      watcher.release();
    }
  });
});
