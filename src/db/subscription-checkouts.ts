// SQL of subscription checkouts (POST /pay/<link id>/subscribe): the exact terms the page asks the
// wallet to subscribe with, and what the page polls until the watcher made the subscription.
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import type { Queryable } from './pool.js';
import type { Scope } from './scope.js';

export interface SubscriptionCheckoutRow {
  id: string;
  payment_link_id: string;
  price_id: string;
  customer_id: string;
  invoice_id: string;
  checkout_reference: string;
  chain_id: number;
  contract_address: string;
  payee_address: string;
  token_address: string;
  amount_atomic: string;
  period_seconds: number;
  fee_bps: number;
  fee_address: string;
  operator_address: string;
  ends_at: Date | null;
  subscription_id: string | null;
  created_at: Date;
}

const COLUMNS = `id, payment_link_id, price_id, customer_id, invoice_id, checkout_reference, chain_id, contract_address,
  payee_address, token_address, amount_atomic::text as amount_atomic, period_seconds, fee_bps, fee_address,
  operator_address, ends_at, subscription_id, created_at`;

export type NewSubscriptionCheckout = Omit<SubscriptionCheckoutRow, 'subscription_id' | 'created_at'>;

export async function insertSubscriptionCheckout(db: Queryable, scope: Scope, c: NewSubscriptionCheckout): Promise<SubscriptionCheckoutRow> {
  const { rows } = await db.query<SubscriptionCheckoutRow>(
    `insert into subscription_checkouts (id, account_id, environment, payment_link_id, price_id, customer_id, invoice_id,
       checkout_reference, chain_id, contract_address, payee_address, token_address, amount_atomic, period_seconds, fee_bps,
       fee_address, operator_address, ends_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::numeric, $14, $15, $16, $17, $18)
     returning ${COLUMNS}`,
    [
      c.id, scope.accountId, scope.environment, c.payment_link_id, c.price_id, c.customer_id, c.invoice_id, c.checkout_reference,
      c.chain_id, c.contract_address, c.payee_address, c.token_address, c.amount_atomic, c.period_seconds, c.fee_bps,
      c.fee_address, c.operator_address, c.ends_at,
    ],
  );
  return rows[0];
}

/** A checkout as its page follows it: its first invoice's state and the subscription once made. */
export interface SubscriptionCheckoutState {
  id: string;
  invoice_id: string;
  invoice_status: InvoiceStatus;
  checkout_reference: string;
  chain_id: number;
  currency: string;
  subscription_id: string | null;
  subscription_status: string | null;
  onchain_id: string | null;
}

/** The checkout `id` of the link `linkId` (both must match: the pair is the page's access), or null. */
export async function findSubscriptionCheckoutState(db: Queryable, linkId: string, id: string): Promise<SubscriptionCheckoutState | null> {
  const { rows } = await db.query<SubscriptionCheckoutState>(
    `select k.id, k.invoice_id, i.status as invoice_status, k.checkout_reference, k.chain_id, i.currency,
       k.subscription_id, s.status as subscription_status, s.onchain_id
     from subscription_checkouts k join invoices i on i.id = k.invoice_id left join subscriptions s on s.id = k.subscription_id
     where k.id = $1 and k.payment_link_id = $2`,
    [id, linkId],
  );
  return rows[0] ?? null;
}
