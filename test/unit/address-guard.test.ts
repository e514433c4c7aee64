// The SSRF guard at delivery time: the sender checks the host before each request and the
// socket's own lookup checks again, so both must refuse what endpoint creation refuses.
import { describe, expect, it } from 'vitest';
import { guardedLookup } from '../../src/webhooks/address-guard.js';
import { createWebhookSender } from '../../src/webhooks/sender.js';

const IPV4_COMPATIBLE = ['[::127.0.0.1]', '[::7f00:1]', '[::2]', '[::a9fe:a9fe]', '[::8.8.8.8]'];

describe('address guard at delivery time', () => {
  it('the sender refuses IPv4-compatible IPv6 literals (all of ::/96) without connecting', async () => {
    const sender = createWebhookSender({ timeoutMs: 2_000, allowPrivate: false });
    try {
      for (const host of IPV4_COMPATIBLE) {
        const res = await sender.post(`http://${host}:9/hook`, {}, '{}');
        expect([host, res.statusCode, res.error]).toEqual([host, null, expect.stringMatching(/^refused: the address .* is not a public address$/)]);
      }
    } finally {
      await sender.close();
    }
  });

  it("the socket's lookup refuses them too", async () => {
    const lookup = guardedLookup(false);
    for (const host of IPV4_COMPATIBLE) {
      const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => lookup(host, { all: true }, (e: NodeJS.ErrnoException | null) => resolve(e)));
      expect([host, err?.code]).toEqual([host, 'EADDRREFUSED']);
    }
  });
});
