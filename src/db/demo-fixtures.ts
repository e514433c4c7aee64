// The reads and writes `npm run demo` makes to stay idempotent: find the objects of an earlier
// run instead of creating them again.
import type { Queryable } from './pool.js';

/** How many of these key hashes are live keys of the account. */
export async function countLiveKeys(db: Queryable, accountId: string, hashes: Buffer[]): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select count(*)::int as n from credentials where account_id = $1 and revoked_at is null and secret_hash = any($2)',
    [accountId, hashes],
  );
  return rows[0].n;
}

/** Revokes the account's live keys whose name starts with `prefix`. */
export async function revokeKeysNamed(db: Queryable, accountId: string, prefix: string): Promise<void> {
  await db.query(`update credentials set revoked_at = now() where account_id = $1 and revoked_at is null and starts_with(name, $2)`, [
    accountId,
    prefix,
  ]);
}

async function firstId(db: Queryable, sql: string, values: unknown[]): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(sql, values);
  return rows[0]?.id ?? null;
}

/** Ids of the demo's sandbox objects from an earlier run, null where there is none. */
export const findDemoObjects = {
  product: (db: Queryable, accountId: string) =>
    firstId(db, `select id from products where account_id = $1 and environment = 'sandbox' and metadata->>'demo' = 'true'`, [accountId]),
  /** On `network` when given: a link made by a run without the local chain cannot be paid on it. */
  paymentLinkNamed: (db: Queryable, accountId: string, name: string, network: string | null = null) =>
    firstId(db, `select id from payment_links where account_id = $1 and environment = 'sandbox' and name = $2 and ($3::text is null or network = $3)`, [
      accountId, name, network,
    ]),
  /** With a price on `network` when given (a plan made before the local chain ran is on base-sepolia, where nothing subscribes). */
  subscriptionProduct: (db: Queryable, accountId: string, network: string | null = null) =>
    firstId(
      db,
      `select p.id from products p where p.account_id = $1 and p.environment = 'sandbox' and p.metadata->>'demo' = 'subscription'
         and ($2::text is null or exists (select 1 from prices pr where pr.product_id = p.id and pr.network = $2))`,
      [accountId, network],
    ),
  /** The newest demo draft, on `network` when given (the demo on a local chain wants one there). */
  draftInvoice: (db: Queryable, accountId: string, network: string | null = null) =>
    firstId(
      db,
      `select id from invoices where account_id = $1 and environment = 'sandbox' and status = 'draft' and metadata->>'demo' = 'true'
         and ($2::text is null or network = $2) order by created_at desc limit 1`,
      [accountId, network],
    ),
};

export async function linkHasPayments(db: Queryable, linkId: string): Promise<boolean> {
  const { rows } = await db.query('select 1 from payment_link_payments where payment_link_id = $1 limit 1', [linkId]);
  return rows.length > 0;
}
