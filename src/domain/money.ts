// Money is decimal.js with a precision wide enough for 18-decimal tokens and huge totals: the
// default 20 significant digits would silently round a DAI amount's atomic value.
import { Decimal } from 'decimal.js';

export const Money = Decimal.clone({ precision: 100, rounding: Decimal.ROUND_HALF_UP, toExpNeg: -100, toExpPos: 100 });
export type Money = Decimal;

const DECIMAL_RE = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;
/** Largest accepted amount: 10^15 token units. */
export const MAX_INTEGER_DIGITS = 15;

export type AmountCheck =
  | { ok: true; value: Decimal }
  | { ok: false; code: 'amount_invalid' | 'amount_too_precise' | 'amount_too_large' | 'amount_not_positive'; message: string };

/**
 * Checks a decimal string the API received: plain digits with an optional fraction (no sign,
 * exponent or spaces), no more fraction digits than the token has, and within bounds.
 */
export function parseAmount(raw: string, decimals: number, field = 'amount', allowZero = false): AmountCheck {
  const m = DECIMAL_RE.exec(raw);
  if (!m) {
    return { ok: false, code: 'amount_invalid', message: `${field} must be a decimal string such as "12.50" (got ${JSON.stringify(raw.slice(0, 40))}).` };
  }
  if (m[1].length > MAX_INTEGER_DIGITS) {
    return { ok: false, code: 'amount_too_large', message: `${field} must be below 10^${MAX_INTEGER_DIGITS}.` };
  }
  const fraction = (m[2] ?? '.').slice(1).replace(/0+$/, '');
  if (fraction.length > decimals) {
    return { ok: false, code: 'amount_too_precise', message: `${field} has more than ${decimals} decimal places, the precision of the token.` };
  }
  const value = new Money(raw);
  if (!allowZero && value.isZero()) {
    return { ok: false, code: 'amount_not_positive', message: `${field} must be greater than zero.` };
  }
  return { ok: true, value };
}

/** Canonical decimal string: no exponent, no trailing zeros ("10.50" -> "10.5"). */
export function formatDecimal(value: Decimal): string {
  return new Money(value).toFixed();
}

/** Amount in the token's smallest unit, as an integer string. The amount's precision was checked. */
export function toAtomic(value: Decimal, decimals: number): string {
  return new Money(value).times(new Money(10).pow(decimals)).toFixed(0, Decimal.ROUND_DOWN);
}

/** Platform fee in atomic units: amount x bps / 10000, rounded half up to a whole unit. */
export function feeAtomic(amountAtomic: string, feeBps: number): string {
  return new Money(amountAtomic).times(feeBps).div(10_000).toDecimalPlaces(0, Decimal.ROUND_HALF_UP).toFixed(0);
}

export interface LineInput {
  quantity: number;
  unitAmount: Decimal;
}

export function lineTotal(line: LineInput): Decimal {
  return new Money(line.unitAmount).times(line.quantity);
}

export function sumLines(lines: LineInput[]): Decimal {
  return lines.reduce<Decimal>((acc, l) => acc.plus(lineTotal(l)), new Money(0));
}
