// SQL of products and their prices.
import type { Scope } from './invoices.js';
import { listPage, type PageRequest, type PageResult } from './page.js';
import type { Queryable } from './pool.js';

export interface PriceRow {
  id: string;
  product_id: string;
  amount: string;
  amount_atomic: string;
  currency: string;
  network: string;
  chain_id: number;
  token_address: string;
  token_decimals: number;
  cadence: string;
  interval_seconds: number | null;
  active: boolean;
  metadata: Record<string, string>;
  created_at: Date;
  updated_at: Date;
}

export interface ProductRow {
  id: string;
  name: string;
  description: string | null;
  active: boolean;
  deletable: boolean;
  metadata: Record<string, string>;
  prices: PriceRow[];
  created_at: Date;
  updated_at: Date;
}

const PRICE_JSON = `json_build_object('id', pr.id, 'product_id', pr.product_id, 'amount', pr.amount::text,
  'amount_atomic', pr.amount_atomic::text, 'currency', pr.currency, 'network', pr.network, 'chain_id', pr.chain_id,
  'token_address', pr.token_address, 'token_decimals', pr.token_decimals, 'cadence', pr.cadence,
  'interval_seconds', pr.interval_seconds, 'active', pr.active, 'metadata', pr.metadata,
  'created_at', pr.created_at, 'updated_at', pr.updated_at)`;

// A product can be deleted while none of its prices was ever used by a subscription or a link:
// those keep pointing at the price for their whole life.
const PRODUCT_SELECT = `select p.id, p.name, p.description, p.active, p.metadata, p.created_at, p.updated_at,
    not exists (select 1 from prices pr join subscriptions s on s.price_id = pr.id where pr.product_id = p.id)
      and not exists (select 1 from prices pr join payment_links l on l.price_id = pr.id where pr.product_id = p.id)
      as deletable,
    coalesce((select json_agg(${PRICE_JSON} order by pr.created_at, pr.id) from prices pr where pr.product_id = p.id), '[]') as prices
  from products p`;

type RawProduct = Omit<ProductRow, 'prices'> & { prices: (Omit<PriceRow, 'created_at' | 'updated_at'> & { created_at: string; updated_at: string })[] };

function toProduct(raw: RawProduct): ProductRow {
  return {
    ...raw,
    prices: raw.prices.map((p) => ({ ...p, created_at: new Date(p.created_at), updated_at: new Date(p.updated_at) })),
  };
}

export async function findProduct(db: Queryable, scope: Scope, id: string): Promise<ProductRow | null> {
  const { rows } = await db.query<RawProduct>(`${PRODUCT_SELECT} where p.id = $1 and p.account_id = $2 and p.environment = $3`, [
    id, scope.accountId, scope.environment,
  ]);
  return rows[0] ? toProduct(rows[0]) : null;
}

/** A page of the scope's products with their prices, newest first (see page.ts). */
export async function listProducts(db: Queryable, scope: Scope, page: PageRequest): Promise<PageResult<ProductRow>> {
  const result = await listPage<RawProduct>(db, scope, { table: 'products', alias: 'p', select: PRODUCT_SELECT }, page);
  return result.ok ? { ...result, rows: result.rows.map(toProduct) } : result;
}

export type DeleteProductResult = 'deleted' | 'missing' | 'not_deletable';

/**
 * Deletes a product and its prices while none of them is used. The product's row lock orders it
 * against a link or subscription being created on one of its prices (they take a share lock on
 * the product, see findPriceForUse): that one commits first and makes this a refusal, or finds
 * the price gone.
 */
export async function deleteProductIfUnused(db: Queryable, scope: Scope, id: string): Promise<DeleteProductResult> {
  const { rows } = await db.query<{ id: string }>(
    'select id from products where id = $1 and account_id = $2 and environment = $3 for update',
    [id, scope.accountId, scope.environment],
  );
  if (!rows[0]) return 'missing';
  const product = await findProduct(db, scope, id);
  if (!product?.deletable) return 'not_deletable';
  await db.query('delete from prices where product_id = $1', [id]);
  await db.query('delete from products where id = $1', [id]);
  return 'deleted';
}

export async function insertProduct(
  db: Queryable,
  p: { id: string; scope: Scope; name: string; description: string | null; metadata: Record<string, string> },
): Promise<void> {
  await db.query(
    'insert into products (id, account_id, environment, name, description, metadata) values ($1, $2, $3, $4, $5, $6)',
    [p.id, p.scope.accountId, p.scope.environment, p.name, p.description, JSON.stringify(p.metadata)],
  );
}

export interface NewPrice {
  id: string;
  productId: string;
  amount: string;
  amountAtomic: string;
  currency: string;
  network: string;
  chainId: number;
  tokenAddress: string;
  tokenDecimals: number;
  cadence: string;
  intervalSeconds: number | null;
  metadata: Record<string, string>;
}

export async function insertPrice(db: Queryable, scope: Scope, p: NewPrice): Promise<void> {
  // clock_timestamp(), not the default now(): the prices of one product are inserted in one
  // transaction, where now() is the same instant for all, and the product lists its prices by
  // created_at: they must come back in the order they were given.
  await db.query(
    `insert into prices (id, account_id, environment, product_id, amount, amount_atomic, currency, network, chain_id,
       token_address, token_decimals, cadence, interval_seconds, metadata, created_at, updated_at)
     values ($1, $2, $3, $4, $5::numeric, $6::numeric, $7, $8, $9, $10, $11, $12, $13, $14, clock_timestamp(), clock_timestamp())`,
    [
      p.id, scope.accountId, scope.environment, p.productId, p.amount, p.amountAtomic, p.currency, p.network, p.chainId,
      p.tokenAddress, p.tokenDecimals, p.cadence, p.intervalSeconds, JSON.stringify(p.metadata),
    ],
  );
}

export async function updateProduct(
  db: Queryable,
  scope: Scope,
  id: string,
  edit: { name?: string; description?: string; active?: boolean; metadata?: Record<string, string> },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update products set name = coalesce($4, name), description = coalesce($5, description),
       active = coalesce($6, active), metadata = coalesce($7::jsonb, metadata), updated_at = now()
     where id = $1 and account_id = $2 and environment = $3`,
    [id, scope.accountId, scope.environment, edit.name ?? null, edit.description ?? null, edit.active ?? null,
      edit.metadata === undefined ? null : JSON.stringify(edit.metadata)],
  );
  return rowCount === 1;
}

export interface PriceWithProduct extends PriceRow {
  product_active: boolean;
}

/** A price of the scope with its product's state, locked so the product cannot turn inactive meanwhile. */
export async function findPriceForUse(db: Queryable, scope: Scope, id: string): Promise<PriceWithProduct | null> {
  const { rows } = await db.query<PriceWithProduct>(
    `select pr.id, pr.product_id, pr.amount::text as amount, pr.amount_atomic::text as amount_atomic, pr.currency,
       pr.network, pr.chain_id, pr.token_address, pr.token_decimals, pr.cadence, pr.interval_seconds, pr.active,
       pr.metadata, pr.created_at, pr.updated_at, p.active as product_active
     from prices pr join products p on p.id = pr.product_id
     where pr.id = $1 and pr.account_id = $2 and pr.environment = $3
     for share of p`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}
