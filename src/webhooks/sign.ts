// Standard Webhooks signing (https://www.standardwebhooks.com), with the reference library, so
// any receiver using a Standard Webhooks library verifies our requests.
import { Webhook } from 'standardwebhooks';

/**
 * The three signature headers for one attempt. During a secret rotation the message is signed
 * with every current secret, space separated: a receiver with either secret verifies it.
 */
export function signatureHeaders(secrets: string[], messageId: string, at: Date, body: string): Record<string, string> {
  const signatures = secrets.map((s) => new Webhook(s).sign(messageId, at, body));
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}
