// Renders the subject, HTML and text bodies of the customer emails from the Handlebars files in
// templates/. Amounts and dates are formatted exactly as on the PDF, by the same functions, in
// the invoice's locale; every phrase comes from the locale's catalogue (`{{t "key"}}`, see
// src/i18n/messages.ts), so one set of templates serves every language.
import type Handlebars from 'handlebars';
import { DELIVERY_KINDS, type DeliveryKind } from '../domain/delivery-kinds.js';
import type { InvoiceDocument } from '../domain/invoice-document.js';
import { formatDocumentDate, formatInvoiceAmount } from '../domain/invoice-format.js';
import { MESSAGES, messagesFor, type WithMessages } from '../i18n/messages.js';
import { compileTemplate, documentTemplates, readTemplate } from '../i18n/templates.js';

/** One email (subject, HTML and text templates) per delivery kind. */
export type EmailKind = DeliveryKind;

export const EMAIL_KINDS: readonly EmailKind[] = DELIVERY_KINDS;

export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
}

/** What the templates see: display-ready strings, every key always present (strict mode). */
interface EmailView {
  code: string;
  reference: string;
  merchantName: string;
  merchantEmail: string | null;
  customerName: string | null;
  customerEmail: string;
  greetingName: string;
  amount: string;
  currency: string;
  network: string;
  issuedDate: string;
  dueDate: string | null;
  memo: string | null;
  footer: string | null;
  taxId: string | null;
  payUrl: string;
  /** Where and how to pay on-chain (settlement address, payment reference, token contract); null when the invoice has none. */
  onChain: { to: string; paymentReference: string; tokenAddress: string | null; viaProxy: boolean } | null;
  /** The payments that make up what was received (receipts); url null when the chain has no explorer. */
  payments: { amount: string; txHash: string; url: string | null }[];
  /** The acknowledgement of a partial payment: what arrived (and in which transaction), what remains. */
  partial: { amount: string; remaining: string; txHash: string; url: string | null } | null;
  /** A failed charge attempt of a subscription's period: what failed, the attempt, the next one or what became of the subscription. */
  failure: { message: string; attempt: number; nextAttemptDate: string | null; canceled: boolean } | null;
  /** Sandbox: the email says plainly that it is a test and no real funds move. */
  testMode: boolean;
  isReceipt: boolean;
  paidDate: string | null;
  /** The kind's own phrases ("invoice.subject"...) are looked up under this prefix. */
  kind: EmailKind;
  lang: string;
}

type Part = 'subject' | 'html' | 'text';
type Template = Handlebars.TemplateDelegate<EmailView & { subject?: string }>;

const cache = new Map<string, Template>();

function compile(kind: EmailKind, part: Part): Template {
  const key = `${kind}.${part}`;
  let template = cache.get(key);
  if (template === undefined) {
    if (part === 'html' && !documentTemplates.partials.layout) {
      documentTemplates.registerPartial('layout', compileTemplate(readTemplate('layout.html.hbs')));
    }
    // Only HTML is escaped; in the subject and the text body "&" must stay "&".
    template = compileTemplate<EmailView & { subject?: string }>(readTemplate(`${key}.hbs`), { noEscape: part !== 'html' });
    cache.set(key, template);
  }
  return template;
}

/** Compiles every template now, so a missing or broken file fails at start, not at first send. */
export function loadEmailTemplates(): void {
  for (const kind of EMAIL_KINDS) for (const part of ['subject', 'html', 'text'] as const) compile(kind, part);
}

/**
 * A subject is a header line: CR/LF from user text (merchant name, invoice code) would start a new
 * header. Other control characters have no business there either.
 */
function headerSafe(value: string): string {
  return value
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ')
    .replace(/ {2,}/g, ' ')
    .trim();
}

function view(kind: EmailKind, doc: InvoiceDocument): EmailView & WithMessages {
  const pay = new URL(doc.payUrl);
  // The link goes into href="": only web links, never javascript: or data:.
  if (pay.protocol !== 'https:' && pay.protocol !== 'http:') throw new Error(`payUrl must be http(s), got ${pay.protocol}`);
  if (kind.startsWith('reminder') && doc.dueAt === null) throw new Error(`a ${kind} email needs a due date (invoice ${doc.invoiceId})`);
  if (kind === 'receipt' && !doc.paidAt) throw new Error(`a receipt needs a paid date (invoice ${doc.invoiceId})`);
  if (kind === 'partial_payment' && !doc.partialPayment) throw new Error(`a partial payment email needs the payment (invoice ${doc.invoiceId})`);
  if (kind === 'payment_failed' && !doc.paymentFailure) throw new Error(`a payment failed email needs the failure (invoice ${doc.invoiceId})`);
  // The explorer links go into href="" too.
  for (const url of [...(doc.payments ?? []).map((p) => p.url), doc.partialPayment?.url ?? null]) {
    if (url !== null && !/^https?:$/.test(new URL(url).protocol)) throw new Error(`transaction url must be http(s), got ${url}`);
  }
  const locale = doc.locale ?? 'en';
  const messages = messagesFor(locale);
  return {
    [MESSAGES]: messages,
    code: doc.code,
    reference: doc.reference,
    merchantName: doc.merchant.name,
    merchantEmail: doc.merchant.email,
    customerName: doc.customer.name,
    customerEmail: doc.customer.email,
    greetingName: doc.customer.name ?? doc.customer.email,
    amount: formatInvoiceAmount(doc, doc.amount),
    currency: doc.currency,
    network: doc.network,
    issuedDate: formatDocumentDate(doc.issuedAt, doc.timeZone, locale),
    dueDate: doc.dueAt === null ? null : formatDocumentDate(doc.dueAt, doc.timeZone, locale),
    memo: doc.memo,
    footer: doc.footer,
    taxId: doc.taxId,
    payUrl: doc.payUrl,
    onChain: doc.onChain ? { ...doc.onChain, tokenAddress: doc.tokenAddress ?? null, viaProxy: doc.onChain.viaProxy === true } : null,
    payments: (doc.payments ?? []).map((p) => ({ amount: formatInvoiceAmount(doc, p.amount), txHash: p.txHash, url: p.url })),
    partial: doc.partialPayment
      ? {
          amount: formatInvoiceAmount(doc, doc.partialPayment.amount),
          remaining: formatInvoiceAmount(doc, doc.partialPayment.remaining),
          txHash: doc.partialPayment.txHash,
          url: doc.partialPayment.url,
        }
      : null,
    failure: doc.paymentFailure
      ? {
          message: doc.paymentFailure.message,
          attempt: doc.paymentFailure.attempt,
          nextAttemptDate: doc.paymentFailure.nextAttemptAt === null ? null : formatDocumentDate(doc.paymentFailure.nextAttemptAt, doc.timeZone, locale),
          canceled: doc.paymentFailure.finalAction === 'cancel',
        }
      : null,
    testMode: doc.testMode === true,
    isReceipt: kind === 'receipt',
    paidDate: doc.paidAt ? formatDocumentDate(doc.paidAt, doc.timeZone, locale) : null,
    kind,
    lang: messages.language,
  };
}

export function renderEmail(kind: EmailKind, doc: InvoiceDocument): RenderedEmail {
  const data = view(kind, doc);
  const subject = headerSafe(compile(kind, 'subject')(data));
  return {
    subject,
    html: compile(kind, 'html')({ ...data, subject }),
    text: compile(kind, 'text')(data),
  };
}
