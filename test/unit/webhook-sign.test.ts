// The signing of src/webhooks/sign.ts (node:crypto) against the `standardwebhooks` reference
// library: the same signature for the same secret, id, instant and body, and the library verifies
// the headers it produces (a rotation's two signatures included).
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret } from '../../src/domain/webhooks.js';
import { signatureHeaders, signMessage } from '../../src/webhooks/sign.js';

describe('webhook signatures', () => {
  it('equal the standardwebhooks library signature, for any secret, body and instant', () => {
    const bodies = ['', '{}', JSON.stringify({ id: 'evt_1', data: { object: { memo: 'Grüße, 支払い, emoji 🎉' } } }), randomBytes(3000).toString('base64')];
    for (let i = 0; i < 50; i++) {
      const secret = newWebhookSecret();
      const at = new Date(1_700_000_000_000 + i * 7_919_123);
      const body = bodies[i % bodies.length];
      expect(signMessage(secret, `evt_${i}`, at, body)).toBe(new Webhook(secret).sign(`evt_${i}`, at, body));
    }
  });

  it('the library verifies the headers, with either secret during a rotation', () => {
    const [oldSecret, newSecret] = [newWebhookSecret(), newWebhookSecret()];
    const body = JSON.stringify({ id: 'evt_x', type: 'invoice.paid' });
    const headers = signatureHeaders([newSecret, oldSecret], 'evt_x', new Date(), body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secret of [newSecret, oldSecret]) expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow();
  });
});
