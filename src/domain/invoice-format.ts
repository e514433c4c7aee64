// How amounts, quantities and dates of an invoice are written for people: shared by the PDF and
// the email templates, so both say exactly the same thing. Pure functions.
import { Decimal } from 'decimal.js';
import type { InvoiceDocument } from './invoice-document.js';

/**
 * Formats a decimal string in token units for people, the locale's way (Intl: "1,234.50" in
 * English, "1.234,50" in German): at least two decimals, and every significant decimal the value
 * has (never rounded to 2: "0.000001" stays). Intl formats the decimal string itself, exactly;
 * the value never goes through a JS number.
 */
export function formatTokenAmount(value: string, maxDecimals = 18, locale = 'en'): string {
  const d = new Decimal(value);
  const decimals = Math.min(Math.max(d.decimalPlaces(), 2), maxDecimals);
  const fixed = d.toFixed(decimals, Decimal.ROUND_HALF_UP);
  // Intl.NumberFormat v3 takes a decimal string and keeps every digit; the type says number.
  return numberFormatFor(locale, decimals).format(fixed as unknown as number);
}

const numberFormats = new Map<string, Intl.NumberFormat>();

function numberFormatFor(locale: string, decimals: number): Intl.NumberFormat {
  const key = `${locale}|${decimals}`;
  let format = numberFormats.get(key);
  if (!format) {
    format = new Intl.NumberFormat(locale, { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
    numberFormats.set(key, format);
  }
  return format;
}

const dateLocale = (locale: string) => (locale === 'en' ? 'en-US' : locale);

/** An amount of this invoice's token, formatted as on the PDF (with the decimals the invoice was issued with). */
export function formatInvoiceAmount(doc: InvoiceDocument, value: string): string {
  return formatTokenAmount(value, doc.tokenDecimals, doc.locale);
}

/** Quantities are plain numbers in the view; printed without exponent and with separators. */
export function formatQuantity(quantity: number, locale = 'en'): string {
  return numberFormatFor(locale, 0).format(new Decimal(quantity).toFixed() as unknown as number);
}

/**
 * "21 Nov 2026" (en), "21. Nov. 2026" (de), "21 nov. 2026" (fr) in the given IANA zone. The
 * locale is always explicit (never the process default) so output does not depend on the host;
 * an unknown zone falls back to UTC rather than printing "Invalid DateTime" on a customer's
 * invoice.
 */
export function formatDocumentDate(iso: string, timeZone: string, locale = 'en'): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) throw new RangeError(`invalid ISO date "${iso}"`);
  const format = dateFormatFor(timeZone, locale);
  if (locale !== 'en') return format.format(date);
  // Plain "en": day month year with the US month abbreviations ("5 Sep 2026"), which reads the
  // same on both sides of the Atlantic (en-GB would say "Sept", en-US "Sep 5, 2026").
  const parts = Object.fromEntries(format.formatToParts(date).map((p) => [p.type, p.value]));
  return `${parts.day} ${parts.month} ${parts.year}`;
}

// Building an Intl formatter costs far more than using one: one per zone and locale, for the process.
const dateFormats = new Map<string, Intl.DateTimeFormat>();

function dateFormatFor(timeZone: string, locale: string): Intl.DateTimeFormat {
  const key = `${timeZone}|${locale}`;
  let format = dateFormats.get(key);
  if (!format) {
    const options = { day: 'numeric', month: 'short', year: 'numeric' } as const;
    try {
      format = new Intl.DateTimeFormat(dateLocale(locale), { ...options, timeZone });
    } catch {
      format = new Intl.DateTimeFormat(dateLocale(locale), { ...options, timeZone: 'UTC' });
    }
    dateFormats.set(key, format);
  }
  return format;
}
