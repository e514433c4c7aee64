// The view of one invoice that the PDF and the emails are rendered from. Built by the worker from
// one database read; plain data, so the renderers are pure functions of it.

export interface InvoiceDocumentLine {
  description: string;
  quantity: number;
  /** Decimal string in token units, e.g. "12.5". */
  unitAmount: string;
  /** Decimal string: quantity x unitAmount, computed with decimal.js. */
  lineTotal: string;
}

export interface InvoiceDocument {
  invoiceId: string;
  /** Human readable number printed on the document, e.g. "INV-000042". */
  code: string;
  reference: string;
  merchant: { name: string; email: string | null };
  customer: { name: string | null; email: string };
  /** ISO 8601 instants. */
  issuedAt: string;
  dueAt: string | null;
  /** IANA zone the dates are printed in (customer's, else account's). */
  timeZone: string;
  /** Total, decimal string in token units. */
  amount: string;
  /**
   * A draft with neither an amount nor line items yet (a sent invoice always has one): its
   * preview says so rather than printing a total of 0, and `amount` is "0".
   */
  amountUnset?: boolean;
  currency: string;
  /** The token's decimals as the invoice was issued with them (amounts are printed to at most these). */
  tokenDecimals: number;
  /** Network name as in the API, e.g. "base-sepolia". */
  network: string;
  chainId: number;
  lines: InvoiceDocumentLine[];
  memo: string | null;
  footer: string | null;
  taxId: string | null;
  /** `{payment_page_base}/<reference>` */
  payUrl: string;
  /** BCP 47 locale the document is written in (templates/locales); English when absent. */
  locale?: string;
  /** A sandbox document: every page and email says it is a test on a test network. */
  testMode?: boolean;
  /** The token's contract address on the chain, printed with the payment terms. */
  tokenAddress?: string | null;
  /**
   * Where and with which reference the invoice is paid on-chain: fixed at send when the account had
   * a settlement address; absent or null otherwise (and on drafts). `viaProxy`: the invoice has
   * payment instructions (its chain has a fee proxy), so the payment page's wallet pays with the
   * reference; without it only a plain transfer is possible, and the documents say only that.
   */
  onChain?: { to: string; paymentReference: string; viaProxy?: boolean } | null;
  /**
   * The payments that make up what the invoice received, in chain order: each one's amount
   * (decimal string in token units, what it counted toward the invoice) and transaction, linked
   * when the chain has an `explorer_url`. Absent or empty when none (paid without a chain payment).
   */
  payments?: { amount: string; txHash: string; url: string | null }[];
  /**
   * The email acknowledging one partial payment: what it counted (decimal string in token units),
   * its transaction, and what remained to pay once it was applied.
   */
  partialPayment?: { amount: string; remaining: string; txHash: string; url: string | null };
  /**
   * A failed charge attempt of a subscription's period (the payment_failed email): the words the
   * customer reads, the attempt's number, when the next one happens (ISO 8601; null after the
   * last) and, after the last, whether the subscription was canceled or kept.
   */
  paymentFailure?: { message: string; attempt: number; nextAttemptAt: string | null; finalAction: 'cancel' | 'keep' | null };
  /** When the invoice was paid (ISO 8601), for receipts. */
  paidAt?: string | null;
  /**
   * A state printed across every page and under the title: a draft's preview, a paid or a void
   * invoice. Absent on the document that is emailed (an open invoice).
   */
  stamp?: InvoiceStamp;
}

export interface InvoiceStamp {
  label: 'DRAFT' | 'PAID' | 'VOID';
  /** The label in the document's language ("PAYÉE"). */
  text: string;
  /** The line under the title, e.g. "Paid on 3 March 2026". */
  note: string;
}
