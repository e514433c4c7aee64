import { describe, expect, it } from 'vitest';
import { checkIdempotencyKey, requestFingerprint } from '../../src/domain/idempotency.js';

describe('checkIdempotencyKey', () => {
  it('takes 1 to 255 visible characters', () => {
    expect(checkIdempotencyKey('a')).toEqual({ ok: true, key: 'a' });
    expect(checkIdempotencyKey('k'.repeat(255))).toEqual({ ok: true, key: 'k'.repeat(255) });
    const uuid = '5f6c1c6e-1f0b-4c3e-9a53-2f1d0b0a9e11';
    expect(checkIdempotencyKey(uuid)).toEqual({ ok: true, key: uuid });
  });

  it('refuses empty, over-long, repeated and control-character keys, saying why', () => {
    for (const bad of ['', 'k'.repeat(256), ['a', 'b'], 'a\u0001b']) {
      const v = checkIdempotencyKey(bad);
      expect(v.ok).toBe(false);
      if (!v.ok) expect(v.message).toContain('Idempotency-Key');
    }
    const long = checkIdempotencyKey('k'.repeat(300));
    expect(!long.ok && long.message).toContain('300');
  });
});

describe('requestFingerprint', () => {
  const fp = (m: string, p: string, b: unknown) => requestFingerprint(m, p, b).toString('hex');

  it('ignores key order and formatting of the JSON body', () => {
    expect(fp('POST', '/v1/invoices', { a: 1, b: { c: [1, 2], d: 'x' } })).toBe(fp('post', '/v1/invoices', { b: { d: 'x', c: [1, 2] }, a: 1 }));
    expect(fp('POST', '/v1/x/send', undefined)).toBe(fp('POST', '/v1/x/send', null));
  });

  it('differs for any changed value, path or method', () => {
    const base = fp('POST', '/v1/invoices', { amount: '10' });
    expect(fp('POST', '/v1/invoices', { amount: '10.0' })).not.toBe(base);
    expect(fp('POST', '/v1/invoices', { amount: 10 })).not.toBe(base);
    expect(fp('POST', '/v1/products', { amount: '10' })).not.toBe(base);
    expect(fp('PATCH', '/v1/invoices', { amount: '10' })).not.toBe(base);
    expect(fp('POST', '/v1/invoices', { amount: ['10'] })).not.toBe(base);
  });
});
