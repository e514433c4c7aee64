import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes drawn 4 KiB at a time and each used once: a call to the CSPRNG per id cost more
// than the rest of the id (bench:chain makes 20,000 ids in one range).
const pool = Buffer.alloc(4096);
let next = pool.length;

function randomByte(): number {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++];
}

/** Random base62 string; rejection sampling keeps every character equally likely. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += ALPHABET[byte % 62];
  }
  return out;
}

export type IdPrefix = 'acct' | 'cred' | 'cus' | 'prod' | 'price' | 'inv' | 'plink' | 'pay' | 'simpay' | 'sub' | 'subco' | 'dlv' | 'evt' | 'we' | 'whd';

/**
 * Stripe-style id: `inv_` followed by 24 base62 characters. `pay_` is a payment seen on a chain,
 * `simpay_` a sandbox link's simulated payment (never on a chain), so neither is taken for the other.
 */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(24)}`;
}

/** What a payer's link resolves against: unguessable, distinct from the id. */
export function newInvoiceReference(): string {
  return randomBase62(20);
}

/** Invoice number printed on the document, per account and environment. */
export function formatInvoiceCode(environment: 'sandbox' | 'live', n: number): string {
  return `${environment === 'sandbox' ? 'TEST-' : ''}INV-${String(n).padStart(6, '0')}`;
}
