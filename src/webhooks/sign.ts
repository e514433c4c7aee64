// Standard Webhooks signing (https://www.standardwebhooks.com): v1 = base64(HMAC-SHA256(key,
// "<id>.<timestamp>.<body>")), the key being the secret's base64 after `whsec_`. Computed with
// node:crypto: the `standardwebhooks` library's sign() (pure-JS SHA-256, the key decoded on every
// call) was the worker's largest cost per delivery. test/unit/webhooks.test.ts checks, against
// the library's sign(), that both give the same signature; receivers verify with any Standard
// Webhooks library as before.
import { createHmac } from 'node:crypto';

const PREFIX = 'whsec_';
// A few secrets per endpoint, a bounded number of endpoints: the decoded keys are kept.
const MAX_KEYS = 10_000;
const keys = new Map<string, Buffer>();

function keyOf(secret: string): Buffer {
  let key = keys.get(secret);
  if (!key) {
    key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
    if (key.length === 0) throw new Error("Secret can't be empty.");
    if (keys.size >= MAX_KEYS) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

/** One secret's `v1,<base64>` signature of a message. */
export function signMessage(secret: string, messageId: string, at: Date, body: string): string {
  const signed = `${messageId}.${Math.floor(at.getTime() / 1000)}.${body}`;
  return `v1,${createHmac('sha256', keyOf(secret)).update(signed, 'utf8').digest('base64')}`;
}

/**
 * The three signature headers for one attempt. During a secret rotation the message is signed
 * with every current secret, space separated: a receiver with either secret verifies it.
 */
export function signatureHeaders(secrets: string[], messageId: string, at: Date, body: string): Record<string, string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => signMessage(s, messageId, at, body)).join(' '),
  };
}
