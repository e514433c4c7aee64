import { describe, expect, it } from 'vitest';
import { feeAtomic, formatDecimal, lineTotal, MAX_INTEGER_DIGITS, Money, parseAmount, sumLines, toAtomic } from '../../src/domain/money.js';

const value = (raw: string, decimals = 6) => {
  const r = parseAmount(raw, decimals);
  if (!r.ok) throw new Error(`expected ${raw} to parse, got ${r.code}`);
  return r.value;
};
const code = (raw: string, decimals = 6, allowZero = false) => {
  const r = parseAmount(raw, decimals, 'amount', allowZero);
  return r.ok ? 'ok' : r.code;
};

describe('parseAmount', () => {
  it('accepts plain decimal strings', () => {
    expect(formatDecimal(value('12.50'))).toBe('12.5');
    expect(formatDecimal(value('0.000001'))).toBe('0.000001');
    expect(formatDecimal(value('7'))).toBe('7');
    expect(formatDecimal(value('0.5'))).toBe('0.5');
  });

  it.each(['1e5', '-1', '+1', ' 1', '1 ', '1.', '.5', 'abc', '0x10', '', '01', '00.5', '1,5', '1.2.3', 'NaN', 'Infinity', '١٢', '1_000'])(
    'refuses the non-decimal %j as amount_invalid',
    (raw) => {
      expect(code(raw)).toBe('amount_invalid');
    },
  );

  it('names the field and quotes the input in the message', () => {
    const r = parseAmount('abc', 6, 'line_items[0].unit_amount');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toContain('line_items[0].unit_amount');
  });

  it('refuses more fraction digits than the token has, ignoring trailing zeros', () => {
    expect(code('1.0000001', 6)).toBe('amount_too_precise');
    expect(code('1.1234567', 6)).toBe('amount_too_precise');
    expect(code('1.123456', 6)).toBe('ok');
    expect(code('1.1234560000', 6)).toBe('ok');
    expect(code('0.000000000000000001', 18)).toBe('ok');
    expect(code('0.0000000000000000001', 18)).toBe('amount_too_precise');
  });

  it('bounds the integer part to 15 digits', () => {
    expect(MAX_INTEGER_DIGITS).toBe(15);
    expect(code('999999999999999.999999', 6)).toBe('ok');
    expect(code('1000000000000000', 6)).toBe('amount_too_large');
  });

  it('refuses zero unless allowed', () => {
    expect(code('0')).toBe('amount_not_positive');
    expect(code('0.000000')).toBe('amount_not_positive');
    expect(code('0', 6, true)).toBe('ok');
  });
});

describe('toAtomic', () => {
  it('converts 6-decimal amounts exactly', () => {
    expect(toAtomic(value('12.5'), 6)).toBe('12500000');
    expect(toAtomic(value('0.000001'), 6)).toBe('1');
    expect(toAtomic(value('0.1'), 6)).toBe('100000');
    expect(toAtomic(value('0.3'), 6)).toBe('300000');
  });

  it('converts 18-decimal amounts exactly (no float, no 20-digit rounding)', () => {
    expect(toAtomic(value('1', 18), 18)).toBe('1000000000000000000');
    expect(toAtomic(value('0.000000000000000001', 18), 18)).toBe('1');
    expect(toAtomic(value('123.456789012345678901', 18), 18)).toBe('123456789012345678901');
    expect(toAtomic(value('123.456789012345678', 18), 18)).toBe('123456789012345678000');
  });

  it('converts 15-digit amounts exactly for both precisions', () => {
    expect(toAtomic(value('999999999999999.999999', 6), 6)).toBe('999999999999999999999');
    expect(toAtomic(value('999999999999999.999999999999999999', 18), 18)).toBe('999999999999999999999999999999999');
    expect(toAtomic(value('123456789012345', 18), 18)).toBe('123456789012345000000000000000000');
  });
});

describe('feeAtomic', () => {
  it('is amount x bps / 10000', () => {
    expect(feeAtomic('10000000', 50)).toBe('50000');
    expect(feeAtomic('1000000000000000000', 50)).toBe('5000000000000000');
    expect(feeAtomic('12345', 0)).toBe('0');
    expect(feeAtomic('12345', 10_000)).toBe('12345');
  });

  it('rounds half up to a whole unit', () => {
    // 100 x 50 / 10000 = 0.5 -> 1
    expect(feeAtomic('100', 50)).toBe('1');
    // 99 x 50 / 10000 = 0.495 -> 0
    expect(feeAtomic('99', 50)).toBe('0');
    // 300 x 50 / 10000 = 1.5 -> 2
    expect(feeAtomic('300', 50)).toBe('2');
    // 250 x 50 / 10000 = 1.25 -> 1
    expect(feeAtomic('250', 50)).toBe('1');
    // 1 x 5000 / 10000 = 0.5 -> 1
    expect(feeAtomic('1', 5000)).toBe('1');
  });

  it('stays exact on 33-digit atomic amounts', () => {
    expect(feeAtomic('999999999999999999999999999999999', 50)).toBe('5000000000000000000000000000000');
    expect(feeAtomic('999999999999999999999999999999999', 1)).toBe('100000000000000000000000000000');
  });
});

describe('sums', () => {
  it('lineTotal multiplies exactly', () => {
    expect(formatDecimal(lineTotal({ quantity: 3, unitAmount: new Money('0.1') }))).toBe('0.3');
    expect(formatDecimal(lineTotal({ quantity: 1_000_000, unitAmount: new Money('0.000001') }))).toBe('1');
  });

  it('sumLines adds exactly and is zero for no lines', () => {
    expect(formatDecimal(sumLines([]))).toBe('0');
    expect(
      formatDecimal(
        sumLines([
          { quantity: 2, unitAmount: new Money('10.25') },
          { quantity: 1, unitAmount: new Money('0.1') },
          { quantity: 3, unitAmount: new Money('0.2') },
        ]),
      ),
    ).toBe('21.2');
    expect(
      formatDecimal(
        sumLines([
          { quantity: 1, unitAmount: new Money('0.000000000000000001') },
          { quantity: 1, unitAmount: new Money('999999999999999') },
        ]),
      ),
    ).toBe('999999999999999.000000000000000001');
  });

  it('formatDecimal drops trailing zeros and never uses an exponent', () => {
    expect(formatDecimal(new Money('10.50'))).toBe('10.5');
    expect(formatDecimal(new Money('0.000000000000000001'))).toBe('0.000000000000000001');
    expect(formatDecimal(new Money('100000000000000000000000'))).toBe('100000000000000000000000');
  });
});
