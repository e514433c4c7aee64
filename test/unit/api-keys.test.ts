import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, hashesEqual, isWellFormedKey } from '../../src/domain/api-keys.js';
import { environmentOfKey, KEY_MARKER } from '../../src/domain/environment.js';
import { formatInvoiceCode, newId, newInvoiceReference, randomBase62 } from '../../src/domain/ids.js';

describe('generateApiKey', () => {
  it('is the marker, the environment and 40 base62 characters', () => {
    expect(KEY_MARKER).toBe('sp');
    const sandbox = generateApiKey('sandbox');
    const live = generateApiKey('live');
    expect(sandbox).toMatch(/^sp_sandbox_[0-9A-Za-z]{40}$/);
    expect(live).toMatch(/^sp_live_[0-9A-Za-z]{40}$/);
    expect(isWellFormedKey(sandbox)).toBe(true);
    expect(isWellFormedKey(live)).toBe(true);
  });

  it('never repeats', () => {
    const keys = new Set(Array.from({ length: 500 }, () => generateApiKey('sandbox')));
    expect(keys.size).toBe(500);
  });
});

describe('isWellFormedKey', () => {
  const secret = 'a'.repeat(40);
  it.each([
    '',
    `sp_sandbox_${secret.slice(1)}`,
    `sp_sandbox_${secret}a`,
    `sp_test_${secret}`,
    `xx_sandbox_${secret}`,
    `sp_sandbox_${secret.slice(1)}-`,
    ` sp_sandbox_${secret}`,
    `sp_sandbox_${secret}\n`,
    `SP_SANDBOX_${secret}`,
    `sp_live_${secret.slice(1)}é`,
  ])('refuses %j', (key) => {
    expect(isWellFormedKey(key)).toBe(false);
  });
});

describe('environmentOfKey', () => {
  it('reads the environment from the prefix', () => {
    expect(environmentOfKey(generateApiKey('sandbox'))).toBe('sandbox');
    expect(environmentOfKey(generateApiKey('live'))).toBe('live');
    expect(environmentOfKey('sp_sandbox_')).toBe('sandbox');
    expect(environmentOfKey('sp_livex_abc')).toBeNull();
    expect(environmentOfKey('live_sp_abc')).toBeNull();
    expect(environmentOfKey('')).toBeNull();
  });
});

describe('hashApiKey', () => {
  it('is the sha256 of the whole key', () => {
    const key = generateApiKey('live');
    const hash = hashApiKey(key);
    expect(hash.length).toBe(32);
    expect(hash.equals(createHash('sha256').update(key).digest())).toBe(true);
    expect(hashApiKey(key).equals(hash)).toBe(true);
    // Another last character (a random key ends in 'x' one time in 62).
    const other = `${key.slice(0, -1)}${key.endsWith('x') ? 'y' : 'x'}`;
    expect(hashApiKey(other).equals(hash)).toBe(false);
  });

  it('hashesEqual compares contents and length', () => {
    const a = hashApiKey('sp_sandbox_a');
    expect(hashesEqual(a, Buffer.from(a))).toBe(true);
    expect(hashesEqual(a, hashApiKey('sp_sandbox_b'))).toBe(false);
    expect(hashesEqual(a, a.subarray(0, 16))).toBe(false);
  });
});

describe('ids', () => {
  it('newId is the prefix and 24 base62 characters', () => {
    expect(newId('inv')).toMatch(/^inv_[0-9A-Za-z]{24}$/);
    expect(newId('cred')).toMatch(/^cred_[0-9A-Za-z]{24}$/);
    expect(newInvoiceReference()).toMatch(/^[0-9A-Za-z]{20}$/);
    expect(randomBase62(100)).toHaveLength(100);
  });

  it('formatInvoiceCode marks sandbox numbers and pads to six digits', () => {
    expect(formatInvoiceCode('sandbox', 1)).toBe('TEST-INV-000001');
    expect(formatInvoiceCode('live', 42)).toBe('INV-000042');
    expect(formatInvoiceCode('live', 1234567)).toBe('INV-1234567');
  });
});
