// The rules of the Idempotency-Key header, without I/O: what a key may be, how long it lives, and
// what makes two requests "the same request".
import { createHash } from 'node:crypto';
import { stringify } from 'safe-stable-stringify';

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
/** How long the first response is kept and replayed. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3600 * 1000;
/**
 * How long a first request may run before its key counts as abandoned (its process died) and a
 * retry may run it again. Far above any request's own time limit.
 */
export const IDEMPOTENCY_IN_FLIGHT_LEASE_MS = 60_000;

export type KeyCheck = { ok: true; key: string } | { ok: false; message: string };

/** A key is 1-255 visible characters (a UUID v4 is the usual choice). */
export function checkIdempotencyKey(raw: string | string[]): KeyCheck {
  if (Array.isArray(raw)) return { ok: false, message: 'Send one Idempotency-Key header, not several.' };
  if (raw.length === 0 || raw.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    return { ok: false, message: `The Idempotency-Key header must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters long (a UUID is a good key); it has ${raw.length}.` };
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) return { ok: false, message: 'The Idempotency-Key header must not contain control characters.' };
  return { ok: true, key: raw };
}

/**
 * What makes a retry the same request: method, path and body. The body is compared as JSON
 * (key order and whitespace do not matter), so a client that re-serialises its request still
 * matches, while any changed value does not.
 */
export function requestFingerprint(method: string, path: string, body: unknown): Buffer {
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${path}\n`)
    .update(stringify(body ?? null) ?? 'null')
    .digest();
}
