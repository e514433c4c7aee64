// How amounts, quantities and dates of an invoice are written for people: shared by the PDF and
// the email templates, so both say exactly the same thing. Pure functions.
import { Decimal } from 'decimal.js';
import { resolveToken } from './tokens.js';
import type { InvoiceDocument } from './invoice-document.js';

/**
 * Formats a decimal string in token units for people: thousands separators, at least two
 * decimals, and every significant decimal the value has (never rounded to 2: "0.000001" stays).
 * The value is parsed by decimal.js; it never goes through a JS number.
 */
export function formatTokenAmount(value: string, maxDecimals = 18): string {
  const d = new Decimal(value);
  const decimals = Math.min(Math.max(d.decimalPlaces(), 2), maxDecimals);
  return groupThousands(d.toFixed(decimals, Decimal.ROUND_HALF_UP));
}

/** "-1234567.5" -> "-1,234,567.5"; the input is a plain decimal string (toFixed output). */
function groupThousands(fixed: string): string {
  const negative = fixed.startsWith('-');
  const [int, frac] = (negative ? fixed.slice(1) : fixed).split('.');
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${negative ? '-' : ''}${grouped}${frac === undefined ? '' : `.${frac}`}`;
}

/** Decimals of the invoice's token per the registry; 18 (the widest) for a pair it does not know. */
export function tokenDecimals(network: string, currency: string): number {
  for (const env of ['sandbox', 'live'] as const) {
    const found = resolveToken(env, network, currency);
    if (found.ok) return found.token.decimals;
  }
  return 18;
}

/** An amount of this invoice's token, formatted as on the PDF. */
export function formatInvoiceAmount(doc: InvoiceDocument, value: string): string {
  return formatTokenAmount(value, tokenDecimals(doc.network, doc.currency));
}

/** Quantities are plain numbers in the view; printed without exponent and with separators. */
export function formatQuantity(quantity: number): string {
  return groupThousands(new Decimal(quantity).toFixed());
}

/**
 * "21 Nov 2026" in the given IANA zone. The locale is pinned (not the process default) so output
 * does not depend on the host; an unknown zone falls back to UTC rather than printing
 * "Invalid DateTime" on a customer's invoice.
 */
export function formatDocumentDate(iso: string, timeZone: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) throw new RangeError(`invalid ISO date "${iso}"`);
  const parts = Object.fromEntries(dateFormatFor(timeZone).formatToParts(date).map((p) => [p.type, p.value]));
  return `${parts.day} ${parts.month} ${parts.year}`;
}

// Building an Intl formatter costs far more than using one: one per zone, for the process.
const dateFormats = new Map<string, Intl.DateTimeFormat>();

function dateFormatFor(timeZone: string): Intl.DateTimeFormat {
  let format = dateFormats.get(timeZone);
  if (!format) {
    const options = { day: 'numeric', month: 'short', year: 'numeric' } as const;
    try {
      format = new Intl.DateTimeFormat('en-US', { ...options, timeZone });
    } catch {
      format = new Intl.DateTimeFormat('en-US', { ...options, timeZone: 'UTC' });
    }
    dateFormats.set(timeZone, format);
  }
  return format;
}
