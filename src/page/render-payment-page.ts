// The payment page a payer opens from the invoice email, the PDF's QR code or a payment link:
// server-rendered HTML that works without JavaScript (the instructions, the QR codes as inline
// SVG, how to pay by plain transfer), no external asset (the stylesheet is inline and allowed by
// its hash). One script of its own origin (the wallet script, src/page/wallet/pay.ts) adds "Pay with
// wallet"; it reads what it needs from data attributes, so no inline script is ever needed.
// Pure: data in, HTML out.
import { createHash } from 'node:crypto';
import type Handlebars from 'handlebars';
import QRCode from 'qrcode';
import { formatUnits } from 'viem';
import { erc20TransferUri } from '../domain/eip681.js';
import type { InvoiceStatus } from '../domain/invoice-rules.js';
import { MESSAGES, messagesFor, type WithMessages } from '../i18n/messages.js';
import { compileTemplate, readTemplate } from '../i18n/templates.js';
import { formatDocumentDate, formatTokenAmount } from '../domain/invoice-format.js';
import { feeAtomic } from '../domain/money.js';

const CSS = readTemplate('pay-page.css').trim();

/**
 * The inline stylesheet (by hash), the page's own form, its own wallet script file (no inline
 * script, no other origin) and that script's status requests to the page's own origin. No frame.
 * Inline SVG needs no img-src. The wallet talks to its chain itself, not through the page.
 */
export const PAYMENT_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "connect-src 'self'",
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
  /** "Pay with wallet": the script and where it asks; null leaves the page without script. */
  wallet: WalletBlock | null;
}

export interface WalletBlock {
  /** The wallet script's address (relative to the page: `assets/pay.<hash>.js`). */
  scriptSrc: string;
  /** An invoice's `GET .../status`; null on a payment link (its checkout returns one). */
  statusUrl: string | null;
  /** A payment link's `POST .../checkout`; null on an invoice. */
  checkoutUrl: string | null;
  /** A payment link's: what the payer sees once paid, or where they go then. */
  confirmationMessage?: string | null;
  redirectUrl?: string | null;
}

/** The phrases the wallet script shows, handed to it in a data attribute (no inline script). */
const WALLET_PHRASES = [
  'wallet.button', 'wallet.buttonRest', 'wallet.noWallet', 'wallet.checkout', 'wallet.connecting', 'wallet.switching',
  'wallet.addNetwork', 'wallet.checking', 'wallet.short', 'wallet.approve', 'wallet.approving', 'wallet.confirmPay',
  'wallet.sent', 'wallet.confirming', 'wallet.paid', 'wallet.partial', 'wallet.removed', 'wallet.rejected',
  'wallet.failed', 'wallet.nothingDue', 'wallet.gas', 'wallet.emailNeeded',
] as const;

function walletView(locale: string, block: WalletBlock | null, remaining: string | null) {
  if (!block) return null;
  const m = messagesFor(locale);
  // The script fills the {{placeholders}} itself: hand it the phrases unfilled.
  const raw = Object.fromEntries(WALLET_PHRASES.map((k) => [k, m.raw(k)]));
  return { ...block, messages: JSON.stringify(raw), buttonLabel: m.t(remaining === null ? 'wallet.button' : 'wallet.buttonRest') };
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
  /** 0x + 16 hex, fixed at send; null when the invoice was sent without a settlement address. */
  paymentReference: string | null;
  /** What applied on-chain payments add up to (atomic). */
  paidAtomic: string;
  /** The chain's explorer, for links to the payments' transactions. */
  explorerUrl: string | null;
  /** The payments that make up `paidAtomic`, in chain order: what each counted, its transaction. */
  payments: { countedAtomic: string; txHash: string }[];
}

/** A recurring price's link: the subscription's terms as the page states them, and its "Subscribe with wallet". */
export interface SubscriptionBlock {
  cadence: string;
  intervalSeconds: number;
  amountAtomic: string;
  feeBps: number;
  /** The SubscriptionManager of the chain; null: no subscriptions on it (the page says so). */
  contractAddress: string | null;
  allowanceAtomic: string;
  allowancePeriods: number;
  /** False: a subscription cannot start now (no contract, relayer or settlement address). */
  available: boolean;
  /** False: the price or its product is no longer on sale. */
  onSale: boolean;
  /** The wallet script and `POST .../subscribe`; null when nothing can start (no button). */
  scriptSrc: string | null;
  subscribeUrl: string;
}

/** The phrases the subscription part of the script shows (it reuses the wallet's for the common steps). */
const SUBSCRIPTION_PHRASES = [
  ...WALLET_PHRASES, 'sub.button', 'sub.preparing', 'sub.approve', 'sub.confirm', 'sub.subscribed', 'sub.expired',
] as const;

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
  /** Set for a fixed-price link whose price is recurring: the page offers a subscription, not a payment. */
  subscription: SubscriptionBlock | null;
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
  const paid = BigInt(d.paidAtomic);
  const total = BigInt(d.amountAtomic);
  // After a partial payment, what is asked (the URI, a plain transfer) is what remains: a plain
  // transfer is matched to the invoice by that exact amount.
  const due = paid >= total ? 0n : total - paid;
  const partial = payable && paid > 0n;
  const atomicAmount = (v: bigint) => formatTokenAmount(formatUnits(v, d.tokenDecimals), d.tokenDecimals, d.locale);
  const dueAmount = atomicAmount(due);
  const txUrl = (hash: string) => (d.explorerUrl ? `${d.explorerUrl.replace(/\/+$/, '')}/tx/${hash}` : null);
  const walletUri =
    payable && d.settlementAddress
      ? erc20TransferUri({ tokenAddress: d.tokenAddress, chainId: d.chainId, to: d.settlementAddress, amountAtomic: due.toString() })
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
      paymentReference: d.paymentReference,
      partialText: partial ? m.t('page.partiallyPaid', { paid: atomicAmount(paid), remaining: dueAmount, currency: d.currency }) : null,
      // Partially paid: the headline is what remains, the total beneath it.
      partial,
      remainingOf: partial ? m.t('page.remainingOf', { amount: amount(d.amount), currency: d.currency }) : null,
      payments: d.payments.map((p) => ({ amount: atomicAmount(BigInt(p.countedAtomic)), txHash: p.txHash, url: txUrl(p.txHash) })),
      dueAmount,
      dueAtomic: due.toString(),
      dueDate: d.dueAt ? date(d.dueAt) : null,
      status: partial ? 'partial' : d.status,
      statusLabel: m.t(partial ? 'page.status.partial' : `page.status.${d.status}`),
      paidDate: d.status === 'paid' && d.paidAt ? date(d.paidAt) : null,
      isVoid: d.status === 'void',
      payable,
      walletUri,
      walletQrSvg: walletUri ? await qrSvg(walletUri) : null,
      simulateAction: payable ? d.simulateAction : null,
      wallet: payable ? walletView(d.locale, d.wallet, partial ? dueAmount : null) : null,
      error: d.error,
      pageUrl: d.pageUrl,
      // A paid or void invoice asks for nothing: no code to scan.
      pageQrSvg: payable ? await qrSvg(d.pageUrl) : null,
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
  const sub = d.subscription;
  const atomicText = (v: string) => formatTokenAmount(formatUnits(BigInt(v), d.tokenDecimals), d.tokenDecimals, d.locale);
  const period = sub
    ? sub.cadence === 'custom' || !['daily', 'weekly', 'monthly', 'yearly'].includes(sub.cadence)
      ? m.t('page.sub.period.custom', { seconds: sub.intervalSeconds })
      : m.t(`page.sub.period.${sub.cadence}`)
    : null;
  const subscription = sub
    ? {
        every: m.t('page.sub.every', { amount: amount(d.priceAmount ?? '0'), currency: d.currency, period }),
        amount: amount(d.priceAmount ?? '0'),
        period,
        fee: `${atomicText(feeAtomic(sub.amountAtomic, sub.feeBps))} ${d.currency} (${(sub.feeBps / 100).toFixed(2)} %)`,
        authorise: sub.contractAddress
          ? m.t('page.sub.authorise', {
              contract: sub.contractAddress,
              allowance: atomicText(sub.allowanceAtomic),
              periods: sub.allowancePeriods,
              amount: amount(d.priceAmount ?? '0'),
              currency: d.currency,
            })
          : null,
        notice: !sub.onSale ? m.t('page.sub.productInactive') : !sub.available ? m.t('page.sub.unavailable') : null,
        // The button only when a subscription can start now, on an open link.
        wallet:
          open && sub.onSale && sub.available && sub.scriptSrc
            ? {
                scriptSrc: sub.scriptSrc,
                subscribeUrl: sub.subscribeUrl,
                messages: JSON.stringify(Object.fromEntries(SUBSCRIPTION_PHRASES.map((k) => [k, m.raw(k)]))),
                buttonLabel: m.t('sub.button'),
              }
            : null,
      }
    : null;
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
      subscription,
      // A subscription's link takes no one-time payment: neither the simulated one nor the wallet's.
      simulateAction: open && !sub ? d.simulateAction : null,
      wallet: open && !sub ? walletView(d.locale, d.wallet, null) : null,
      // One form for both ways to pay (the wallet's button, the sandbox's simulate): one amount
      // field, one email field. The wallet's checkout needs the email; the simulate form asks
      // for it only when the link collects it.
      payForm: open && !sub && (d.simulateAction !== null || d.wallet !== null),
      askEmail: d.wallet !== null || d.collectEmail,
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
