// SQL of payment links and the payments they took.
import type { AfterCompletion, FeePayer, PaymentLinkStatus, PaymentLinkType } from '../domain/payment-links.js';
import type { Scope } from './invoices.js';
import type { Queryable } from './pool.js';

export interface PaymentLinkRow {
  id: string;
  name: string;
  type: PaymentLinkType;
  status: PaymentLinkStatus;
  price_id: string | null;
  currency: string;
  network: string;
  chain_id: number;
  token_decimals: number;
  min_amount: string | null;
  max_amount: string | null;
  preset_amount: string | null;
  collect_email: boolean;
  collect_name: boolean;
  collect_phone: boolean;
  collect_address: boolean;
  max_payments: number | null;
  after_completion: AfterCompletion;
  confirmation_message: string | null;
  redirect_url: string | null;
  fee_payer: FeePayer;
  /** Its payments: simulated ones and checkouts paid on-chain (`payment_link_payment_count`). */
  payment_count: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, name, type, status, price_id, currency, network, chain_id, token_decimals,
  min_amount::text as min_amount, max_amount::text as max_amount, preset_amount::text as preset_amount,
  collect_email, collect_name, collect_phone, collect_address, max_payments, after_completion,
  confirmation_message, redirect_url, fee_payer, payment_link_payment_count(id) as payment_count, created_at, updated_at`;

export async function findLink(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<PaymentLinkRow | null> {
  const { rows } = await db.query<PaymentLinkRow>(
    `select ${COLUMNS} from payment_links where id = $1 and account_id = $2 and environment = $3 ${forUpdate ? 'for update' : ''}`,
    [id, scope.accountId, scope.environment],
  );
  return rows[0] ?? null;
}

export async function listLinks(db: Queryable, scope: Scope): Promise<PaymentLinkRow[]> {
  const { rows } = await db.query<PaymentLinkRow>(
    `select ${COLUMNS} from payment_links where account_id = $1 and environment = $2 order by created_at, id`,
    [scope.accountId, scope.environment],
  );
  return rows;
}

export type NewLink = Omit<PaymentLinkRow, 'status' | 'payment_count' | 'created_at' | 'updated_at'>;

export async function insertLink(db: Queryable, scope: Scope, l: NewLink): Promise<PaymentLinkRow> {
  const { rows } = await db.query<PaymentLinkRow>(
    `insert into payment_links (id, account_id, environment, name, type, price_id, currency, network, chain_id,
       token_decimals, min_amount, max_amount, preset_amount, collect_email, collect_name, collect_phone,
       collect_address, max_payments, after_completion, confirmation_message, redirect_url, fee_payer)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::numeric, $12::numeric, $13::numeric, $14, $15, $16, $17,
       $18, $19, $20, $21, $22)
     returning ${COLUMNS}`,
    [
      l.id, scope.accountId, scope.environment, l.name, l.type, l.price_id, l.currency, l.network, l.chain_id,
      l.token_decimals, l.min_amount, l.max_amount, l.preset_amount, l.collect_email, l.collect_name, l.collect_phone,
      l.collect_address, l.max_payments, l.after_completion, l.confirmation_message, l.redirect_url, l.fee_payer,
    ],
  );
  return rows[0];
}

export type LinkEdit = Partial<
  Pick<PaymentLinkRow, 'name' | 'status' | 'collect_email' | 'collect_name' | 'collect_phone' | 'collect_address' | 'after_completion' | 'confirmation_message' | 'redirect_url'>
>;

export async function updateLink(db: Queryable, id: string, e: LinkEdit): Promise<PaymentLinkRow> {
  const { rows } = await db.query<PaymentLinkRow>(
    `update payment_links set name = coalesce($2, name), status = coalesce($3, status),
       collect_email = coalesce($4, collect_email), collect_name = coalesce($5, collect_name),
       collect_phone = coalesce($6, collect_phone), collect_address = coalesce($7, collect_address),
       after_completion = coalesce($8, after_completion), confirmation_message = coalesce($9, confirmation_message),
       redirect_url = coalesce($10, redirect_url), updated_at = now()
     where id = $1 returning ${COLUMNS}`,
    [
      id, e.name ?? null, e.status ?? null, e.collect_email ?? null, e.collect_name ?? null, e.collect_phone ?? null,
      e.collect_address ?? null, e.after_completion ?? null, e.confirmation_message ?? null, e.redirect_url ?? null,
    ],
  );
  return rows[0];
}

/** The payments a link took: simulated ones and its checkouts paid on-chain (one SQL home). */
export async function countPayments(db: Queryable, linkId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('select payment_link_payment_count($1) as n', [linkId]);
  return rows[0].n;
}

/**
 * Deletes a link that took no payment and none of whose checkouts holds money (one partly paid is
 * no payment of the link yet, but it is the merchant's to settle, and the foreign key keeps it).
 * Its checkouts nobody paid stay as plain invoices (detached first: the foreign key restricts).
 * Their update waits for a payment committing on one of them and then skips it, so the check that
 * follows sees that checkout still attached and the delete is refused.
 */
export async function deleteLinkWithoutPayments(db: Queryable, scope: Scope, id: string): Promise<boolean> {
  await db.query(
    `update invoices set payment_link_id = null
     where payment_link_id = $1 and status <> 'paid' and amount_paid_atomic = 0
       and exists (select 1 from payment_links l where l.id = $1 and l.account_id = $2 and l.environment = $3)`,
    [id, scope.accountId, scope.environment],
  );
  const { rowCount } = await db.query(
    `delete from payment_links l where l.id = $1 and l.account_id = $2 and l.environment = $3
       and payment_link_payment_count(l.id) = 0
       and not exists (select 1 from invoices i where i.payment_link_id = l.id)`,
    [id, scope.accountId, scope.environment],
  );
  return rowCount === 1;
}

export interface LinkPaymentRow {
  id: string;
  payment_link_id: string;
  amount: string;
  amount_atomic: string;
  customer_email: string | null;
  tx_hash: string;
  created_at: Date;
}

export async function insertLinkPayment(
  db: Queryable,
  p: { id: string; linkId: string; amount: string; amountAtomic: string; customerEmail: string | null; txHash: string },
): Promise<LinkPaymentRow> {
  const { rows } = await db.query<LinkPaymentRow>(
    `insert into payment_link_payments (id, payment_link_id, amount, amount_atomic, customer_email, tx_hash)
     values ($1, $2, $3::numeric, $4::numeric, $5, $6)
     returning id, payment_link_id, amount::text as amount, amount_atomic::text as amount_atomic, customer_email, tx_hash, created_at`,
    [p.id, p.linkId, p.amount, p.amountAtomic, p.customerEmail, p.txHash],
  );
  return rows[0];
}
