import { createHash, timingSafeEqual } from 'node:crypto';
import { KEY_MARKER, type Environment } from './environment.js';
import { randomBase62 } from './ids.js';

const SECRET_LENGTH = 40;

/** Unrevoked keys per account and environment; revoking one frees its place. */
export const MAX_ACTIVE_API_KEYS = 100;
const KEY_RE = new RegExp(`^${KEY_MARKER}_(sandbox|live)_[0-9A-Za-z]{${SECRET_LENGTH}}$`);

/** A new secret for the environment: `sp_sandbox_` + 40 base62 characters (~238 bits). */
export function generateApiKey(environment: Environment): string {
  return `${KEY_MARKER}_${environment}_${randomBase62(SECRET_LENGTH)}`;
}

export function isWellFormedKey(key: string): boolean {
  return KEY_RE.test(key);
}

/** Keys are stored as their sha256; the secret has enough entropy that no slow hash is needed. */
export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

export function hashesEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
