// The one read a send or reminder job makes: the invoice with its customer, account, lines and
// (when asked) its delivery, as the view the PDF and the emails are rendered from.
import type { DeliveryStatus } from './deliveries.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { lineTotal, formatDecimal, Money } from '../domain/money.js';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { formatUnits } from 'viem';
import { explorerTxUrl, type ChainRegistry } from '../domain/chains.js';
import { instructionsOfRow } from '../domain/payments.js';
import type { Queryable } from './pool.js';

export interface InvoiceForMail {
  doc: InvoiceDocument;
  status: InvoiceStatus;
  remindersEnabled: boolean;
  dueAt: Date | null;
  merchantEmail: string | null;
  environment: 'live' | 'sandbox';
  /** The token's decimals, to turn atomic amounts into the document's decimal strings. */
  tokenDecimals: number;
  /** Status of the delivery named in the read, null when none was asked or it does not exist. */
  deliveryStatus: DeliveryStatus | null;
}

interface Row {
  id: string;
  environment: 'live' | 'sandbox';
  code: string | null;
  reference: string;
  status: InvoiceStatus;
  reminders_enabled: boolean;
  amount: string | null;
  currency: string;
  network: string;
  chain_id: number;
  token_address: string;
  settlement_address: string | null;
  payment_reference: string | null;
  amount_atomic: string | null;
  amount_paid_atomic: string;
  fee_atomic: string | null;
  fee_bps: number | null;
  token_decimals: number;
  /** The payments that make up what it received (confirmed, applied), in chain order. */
  /** What each applied payment counted toward the invoice (payments.counted_atomic). */
  payments: { tx_hash: string; counted_atomic: string }[];
  customer_locale: string;
  paid_at: Date | null;
  sent_at: Date | null;
  created_at: Date;
  due_at: Date | null;
  memo: string | null;
  footer: string | null;
  tax_id: string | null;
  customer_email: string;
  customer_name: string | null;
  customer_time_zone: string | null;
  account_name: string;
  account_email: string | null;
  account_time_zone: string;
  lines: { description: string; quantity: number; unit_amount: string }[];
  delivery_status: DeliveryStatus | null;
}

export async function loadInvoiceForMail(
  db: Queryable,
  invoiceId: string,
  /** The configuration's: where payment links point, and the chains (their explorers and fee proxies). */
  { paymentPageBase, chains }: { paymentPageBase: string; chains: ChainRegistry },
  deliveryId: string | null = null,
): Promise<InvoiceForMail | null> {
  const { rows } = await db.query<Row>({
    name: 'invoice-for-mail',
    text: `select i.id, i.environment, i.code, i.reference, i.status, i.reminders_enabled, i.amount::text as amount, i.currency, i.network,
       i.chain_id, i.token_address, i.settlement_address, i.payment_reference, i.customer_locale, i.paid_at, i.sent_at, i.created_at, i.due_at, i.memo, i.footer, i.tax_id,
       c.email as customer_email, c.name as customer_name, c.time_zone as customer_time_zone,
       a.name as account_name, a.email as account_email, a.time_zone as account_time_zone,
       coalesce((select json_agg(json_build_object('description', l.description, 'quantity', l.quantity,
                  'unit_amount', l.unit_amount::text) order by l.position)
                 from invoice_line_items l where l.invoice_id = i.id), '[]') as lines,
       (select d.status from deliveries d where d.id = $2 and d.invoice_id = i.id) as delivery_status,
       i.amount_atomic::text as amount_atomic, i.amount_paid_atomic::text as amount_paid_atomic, i.fee_atomic::text as fee_atomic,
       i.fee_bps, i.token_decimals,
       coalesce((select json_agg(json_build_object('tx_hash', p.tx_hash, 'counted_atomic', coalesce(p.counted_atomic, 0)::text)
                  order by p.block_number, p.log_index)
                 from payments p where p.invoice_id = i.id and p.status = 'confirmed' and p.outcome = 'applied'), '[]') as payments
     from invoices i
     join customers c on c.id = i.customer_id
     join accounts a on a.id = i.account_id
     where i.id = $1`,
    values: [invoiceId, deliveryId],
  });
  const r = rows[0];
  if (!r) return null;
  const amount = r.amount ?? '0';
  const amountUnset = r.amount === null;
  const lines = r.lines.length
    ? r.lines.map((l) => ({
        description: l.description,
        quantity: l.quantity,
        unitAmount: formatDecimal(new Money(l.unit_amount)),
        lineTotal: formatDecimal(lineTotal({ quantity: l.quantity, unitAmount: new Money(l.unit_amount) })),
      }))
    : amountUnset
      ? []
      : // An invoice with a bare amount prints as one line, so the table is never empty.
        [{ description: r.memo?.split('\n')[0]?.slice(0, 200) || 'Amount due', quantity: 1, unitAmount: amount, lineTotal: amount }];
  return {
    status: r.status,
    remindersEnabled: r.reminders_enabled,
    dueAt: r.due_at,
    merchantEmail: r.account_email,
    environment: r.environment,
    tokenDecimals: r.token_decimals,
    deliveryStatus: r.delivery_status,
    doc: {
      invoiceId: r.id,
      code: r.code ?? r.id,
      reference: r.reference,
      merchant: { name: r.account_name, email: r.account_email },
      customer: { name: r.customer_name, email: r.customer_email },
      issuedAt: (r.sent_at ?? r.created_at).toISOString(),
      dueAt: r.due_at ? r.due_at.toISOString() : null,
      timeZone: r.customer_time_zone ?? r.account_time_zone,
      amount,
      ...(amountUnset ? { amountUnset: true } : {}),
      currency: r.currency,
      tokenDecimals: r.token_decimals,
      network: r.network,
      chainId: r.chain_id,
      lines,
      memo: r.memo,
      footer: r.footer,
      taxId: r.tax_id,
      payUrl: `${paymentPageBase}/${r.reference}`,
      locale: r.customer_locale,
      testMode: r.environment === 'sandbox',
      tokenAddress: r.token_address,
      onChain:
        r.settlement_address && r.payment_reference
          ? { to: r.settlement_address, paymentReference: r.payment_reference, viaProxy: instructionsOfRow(r, chains) !== null }
          : null,
      payments: r.payments.map((p) => ({
        amount: formatUnits(BigInt(p.counted_atomic), r.token_decimals),
        txHash: p.tx_hash,
        url: explorerTxUrl(chains, r.chain_id, p.tx_hash),
      })),
      paidAt: r.paid_at ? r.paid_at.toISOString() : null,
    },
  };
}

/** One payment of an invoice, as its partial-payment acknowledgement names it. */
export interface PaymentForMail {
  tx_hash: string;
  /** What the payment counted toward the invoice (payments.counted_atomic). */
  counted_atomic: string;
}

export async function findPaymentForMail(db: Queryable, invoiceId: string, paymentId: string): Promise<PaymentForMail | null> {
  const { rows } = await db.query<PaymentForMail>(
    `select tx_hash, coalesce(counted_atomic, 0)::text as counted_atomic from payments where id = $1 and invoice_id = $2`,
    [paymentId, invoiceId],
  );
  return rows[0] ?? null;
}
