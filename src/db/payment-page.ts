// The reads of the public payment page: an invoice by its reference, a payment link by its id,
// across accounts (the page has no API key; the unguessable reference or link id is the access).
import type { PaymentLinkStatus, PaymentLinkType } from '../domain/payment-links.js';
import type { Environment } from '../domain/environment.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import type { Queryable } from './pool.js';

export interface PageInvoice {
  id: string;
  account_id: string;
  environment: Environment;
  code: string | null;
  reference: string;
  status: InvoiceStatus;
  amount: string | null;
  amount_atomic: string | null;
  currency: string;
  network: string;
  chain_id: number;
  token_address: string;
  token_decimals: number;
  due_at: Date | null;
  paid_at: Date | null;
  customer_locale: string;
  merchant_name: string;
  /** The address the invoice was sent with (never the account's current one: an invoice sent without one has nothing to pay to). */
  settlement_address: string | null;
  time_zone: string;
  /** Fixed at send when the account had a settlement address; null otherwise. */
  payment_reference: string | null;
  amount_paid_atomic: string;
  fee_atomic: string | null;
  fee_counted_atomic: string;
  fee_bps: number | null;
}

export async function findInvoiceByReference(db: Queryable, reference: string): Promise<PageInvoice | null> {
  const { rows } = await db.query<PageInvoice>({
    name: 'page-invoice',
    text: `select i.id, i.account_id, i.environment, i.code, i.reference, i.status, i.amount::text as amount,
         i.amount_atomic::text as amount_atomic, i.currency, i.network, i.chain_id, i.token_address, i.token_decimals,
         i.due_at, i.paid_at, i.customer_locale, a.name as merchant_name,
         i.settlement_address,
         coalesce(c.time_zone, a.time_zone) as time_zone, i.payment_reference,
         i.amount_paid_atomic::text as amount_paid_atomic, i.fee_atomic::text as fee_atomic,
         i.fee_counted_atomic::text as fee_counted_atomic, i.fee_bps
       from invoices i join accounts a on a.id = i.account_id join customers c on c.id = i.customer_id
       where i.reference = $1`,
    values: [reference],
  });
  return rows[0] ?? null;
}

export interface PageLink {
  id: string;
  account_id: string;
  environment: Environment;
  name: string;
  type: PaymentLinkType;
  status: PaymentLinkStatus;
  currency: string;
  network: string;
  chain_id: number;
  token_decimals: number;
  /** The price's amount for a fixed-price link. */
  price_amount: string | null;
  min_amount: string | null;
  max_amount: string | null;
  preset_amount: string | null;
  collect_email: boolean;
  max_payments: number | null;
  payments: number;
  confirmation_message: string | null;
  redirect_url: string | null;
  after_completion: 'message' | 'redirect';
  merchant_name: string;
  account_time_zone: string;
  /** The account's settlement address in the link's environment: a checkout is payable on-chain only with one. */
  settlement_address: string | null;
  /** A fixed-price link's price: its cadence (one_time or recurring), interval, atomic amount, and whether it and its product are on sale. */
  price_cadence: string | null;
  price_interval_seconds: number | null;
  price_amount_atomic: string | null;
  price_on_sale: boolean | null;
  /** The account's fee rate, included in a subscription's amount per period. */
  platform_fee_bps: number;
}

export async function findLinkForPage(db: Queryable, linkId: string): Promise<PageLink | null> {
  const { rows } = await db.query<PageLink>({
    name: 'page-link',
    text: `select l.id, l.account_id, l.environment, l.name, l.type, l.status, l.currency, l.network, l.chain_id,
         l.token_decimals, p.amount::text as price_amount, l.min_amount::text as min_amount, l.max_amount::text as max_amount,
         l.preset_amount::text as preset_amount, l.collect_email, l.max_payments,
         payment_link_payment_count(l.id) as payments,
         l.confirmation_message, l.redirect_url, l.after_completion, a.name as merchant_name, a.time_zone as account_time_zone,
         s.address as settlement_address, p.cadence as price_cadence, p.interval_seconds as price_interval_seconds,
         p.amount_atomic::text as price_amount_atomic,
         (select p.active and pd.active from products pd where pd.id = p.product_id) as price_on_sale, a.platform_fee_bps
       from payment_links l join accounts a on a.id = l.account_id left join prices p on p.id = l.price_id
         left join settlement_addresses s on s.account_id = l.account_id and s.environment = l.environment
       where l.id = $1`,
    values: [linkId],
  });
  return rows[0] ?? null;
}

/** One payment of a link, to confirm it on the page after a (simulated) payment. */
export async function findLinkPayment(db: Queryable, linkId: string, paymentId: string): Promise<{ amount: string } | null> {
  const { rows } = await db.query<{ amount: string }>(
    'select amount::text as amount from payment_link_payments where id = $1 and payment_link_id = $2',
    [paymentId, linkId],
  );
  return rows[0] ?? null;
}

/** A payment that made up part of an invoice's paid amount. */
export interface PagePayment {
  tx_hash: string;
  /** What the payment counted toward the invoice (payments.counted_atomic). */
  counted_atomic: string;
}

/**
 * The payments that make up what an invoice has received: confirmed and applied to it, in chain
 * order. The page and the receipt list them (amount, transaction).
 */
export async function appliedPaymentsOfInvoice(db: Queryable, invoiceId: string): Promise<PagePayment[]> {
  const { rows } = await db.query<PagePayment>({
    name: 'page-applied-payments',
    text: `select p.tx_hash, coalesce(p.counted_atomic, 0)::text as counted_atomic
       from payments p where p.invoice_id = $1 and p.status = 'confirmed' and p.outcome = 'applied'
       order by p.block_number, p.log_index`,
    values: [invoiceId],
  });
  return rows;
}
