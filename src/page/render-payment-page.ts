// The payment page a payer opens from the invoice email, the PDF's QR code or a payment link:
// server-rendered HTML, no script, no external asset (the stylesheet is inline and allowed by its
// hash, the QR codes are inline SVG), so it works without JavaScript and under a strict
// Content-Security-Policy. Pure: data in, HTML out.
import { createHash } from 'node:crypto';
import type Handlebars from 'handlebars';
import QRCode from 'qrcode';
import { erc20TransferUri } from '../domain/eip681.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { MESSAGES, messagesFor, type WithMessages } from '../i18n/messages.js';
import { compileTemplate, readTemplate } from '../i18n/templates.js';
import { formatDocumentDate, formatTokenAmount } from '../domain/invoice-format.js';

const CSS = readTemplate('pay-page.css').trim();

/**
 * Nothing but the inline stylesheet (by hash) and the page's own form: no script at all, no
 * frame, no external fetch. Inline SVG needs no img-src.
 */
export const PAYMENT_PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(CSS).digest('base64')}'`,
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

let template: Handlebars.TemplateDelegate | null = null;

function compiled(): Handlebars.TemplateDelegate {
  template ??= compileTemplate(readTemplate('pay-page.html.hbs'));
  return template;
}

/** Compiles the template now, so a broken file fails at start, not at the first payer. */
export function loadPaymentPageTemplate(): void {
  compiled();
}

async function qrSvg(text: string): Promise<string> {
  return QRCode.toString(text, { type: 'svg', errorCorrectionLevel: 'M', margin: 4 });
}

interface Common {
  locale: string;
  testMode: boolean;
  merchantName: string;
  currency: string;
  network: string;
  chainId: number;
  tokenAddress: string;
  tokenDecimals: number;
  /** The page's own address, `{payment_page_base}/<reference or link id>`: its QR code. */
  pageUrl: string;
  /** Where the sandbox "Simulate payment" form posts; null hides it (live, or nothing to pay). */
  simulateAction: string | null;
  /** A sentence to show in red (a refused simulated payment). */
  error: string | null;
}

export interface InvoicePageData extends Common {
  code: string;
  status: InvoiceStatus;
  amount: string;
  amountAtomic: string;
  dueAt: Date | null;
  paidAt: Date | null;
  timeZone: string;
  /** The merchant's settlement address: with it, an EIP-681 request for the exact amount. */
  settlementAddress: string | null;
}

export interface LinkPageData extends Common {
  name: string;
  priceAmount: string | null;
  minAmount: string | null;
  maxAmount: string | null;
  presetAmount: string | null;
  active: boolean;
  exhausted: boolean;
  collectEmail: boolean;
  /** The amount of the payment just recorded (after a simulated payment), else null. */
  paidAmount: string | null;
  confirmationMessage: string | null;
  redirectUrl: string | null;
}

function root(locale: string, testMode: boolean, network: string, title: string) {
  const messages = messagesFor(locale);
  return { [MESSAGES]: messages, lang: messages.language, title, testMode, network, css: CSS, notice: null as string | null, invoice: null, link: null };
}

export async function renderInvoicePage(d: InvoicePageData): Promise<string> {
  const m = messagesFor(d.locale);
  const amount = (v: string) => formatTokenAmount(v, d.tokenDecimals, d.locale);
  const date = (at: Date) => formatDocumentDate(at.toISOString(), d.timeZone, d.locale);
  const payable = d.status === 'open' || d.status === 'overdue';
  const walletUri =
    payable && d.settlementAddress
      ? erc20TransferUri({ tokenAddress: d.tokenAddress, chainId: d.chainId, to: d.settlementAddress, amountAtomic: d.amountAtomic })
      : null;
  const view: Record<string, unknown> & WithMessages = {
    ...root(d.locale, d.testMode, d.network, m.t('page.title.invoice', { code: d.code, merchantName: d.merchantName })),
    invoice: {
      merchantName: d.merchantName,
      code: d.code,
      amount: amount(d.amount),
      amountAtomic: d.amountAtomic,
      currency: d.currency,
      network: d.network,
      chainId: d.chainId,
      tokenAddress: d.tokenAddress,
      settlementAddress: d.settlementAddress,
      dueDate: d.dueAt ? date(d.dueAt) : null,
      status: d.status,
      statusLabel: m.t(`page.status.${d.status}`),
      paidDate: d.status === 'paid' && d.paidAt ? date(d.paidAt) : null,
      isVoid: d.status === 'void',
      payable,
      walletUri,
      walletQrSvg: walletUri ? await qrSvg(walletUri) : null,
      simulateAction: payable ? d.simulateAction : null,
      error: d.error,
      pageUrl: d.pageUrl,
      pageQrSvg: await qrSvg(d.pageUrl),
    },
  };
  return compiled()(view);
}

export async function renderLinkPage(d: LinkPageData): Promise<string> {
  const m = messagesFor(d.locale);
  const amount = (v: string) => formatTokenAmount(v, d.tokenDecimals, d.locale);
  const fixed = d.priceAmount !== null;
  const values = { currency: d.currency, min: d.minAmount && amount(d.minAmount), max: d.maxAmount && amount(d.maxAmount) };
  const rangeText = fixed
    ? null
    : d.minAmount && d.maxAmount
      ? m.t('page.link.range', values)
      : d.minAmount
        ? m.t('page.link.min', values)
        : d.maxAmount
          ? m.t('page.link.max', values)
          : m.t('page.link.any');
  const open = d.active && !d.exhausted;
  const view: Record<string, unknown> & WithMessages = {
    ...root(d.locale, d.testMode, d.network, m.t('page.title.link', { name: d.name, merchantName: d.merchantName })),
    link: {
      merchantName: d.merchantName,
      name: d.name,
      fixedAmount: fixed ? amount(d.priceAmount!) : null,
      rangeText,
      presetAmount: d.presetAmount ? amount(d.presetAmount) : null,
      // The input takes the API's decimal syntax (a dot), whatever the locale.
      presetInput: d.presetAmount ?? '',
      currency: d.currency,
      network: d.network,
      chainId: d.chainId,
      tokenAddress: d.tokenAddress,
      active: d.active,
      exhausted: d.active && d.exhausted,
      collectEmail: d.collectEmail,
      paidAmount: d.paidAmount ? amount(d.paidAmount) : null,
      confirmationMessage: d.paidAmount ? d.confirmationMessage : null,
      redirectUrl: d.paidAmount ? d.redirectUrl : null,
      simulateAction: open ? d.simulateAction : null,
      error: d.error,
      pageUrl: d.pageUrl,
      pageQrSvg: await qrSvg(d.pageUrl),
    },
  };
  return compiled()(view);
}

/** What a page without an invoice or link can say: its phrase in the catalogues. */
export type PageNotice = 'page.notFound' | 'page.badRequest' | 'page.forbidden' | 'page.tooManyRequests' | 'page.unavailable';

/** A page that says one thing (not found, a refused request), in the visitor's language. */
export function renderNoticePage(locale: string, notice: PageNotice): string {
  const text = messagesFor(locale).t(notice);
  return compiled()({ ...root(locale, false, '', text), notice: text });
}

export function renderNotFoundPage(locale: string): string {
  return renderNoticePage(locale, 'page.notFound');
}
