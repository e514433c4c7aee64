// The SSRF guard at delivery time: the sender checks the host before each batch's requests to it
// and the socket's own lookup checks again, so both must refuse what endpoint creation refuses.
import { describe, expect, it } from 'vitest';
import type { LookupAddress } from 'node:dns';
import { AddressRefusedError, guardedLookup, resolvePublicAddresses } from '../../src/webhooks/address-guard.js';
import { createWebhookSender } from '../../src/webhooks/sender.js';

const IPV4_COMPATIBLE = ['[::127.0.0.1]', '[::7f00:1]', '[::2]', '[::a9fe:a9fe]', '[::8.8.8.8]'];

describe('address guard at delivery time', () => {
  it('the sender refuses IPv4-compatible IPv6 literals (all of ::/96) without connecting', async () => {
    const sender = createWebhookSender({ timeoutMs: 2_000, allowPrivate: false, perEndpoint: 4 });
    try {
      for (const host of IPV4_COMPATIBLE) {
        const refused = await sender.checkHost(`http://${host}:9/hook`);
        expect([host, refused]).toEqual([host, expect.stringMatching(/^refused: the address .* is not a public address$/)]);
        // And a POST that skipped the check: a socket to an address literal makes no lookup.
        const res = await sender.post('we_test', `http://${host}:9/hook`, {}, '{}');
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

  it('a host name that resolves to a private address is refused without naming the address (logs get it in detail)', async () => {
    const err = await resolvePublicAddresses('localhost', false).then(
      (a: LookupAddress[]) => a,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AddressRefusedError);
    const refused = err as AddressRefusedError;
    expect(refused.message).toBe('the host localhost does not resolve to public addresses only');
    expect(refused.detail).toMatch(/^the host localhost resolves to (127\.0\.0\.1|::1), which is not a public address$/);
  });

  it('a host name that does not resolve is refused in the same words as a private one', async () => {
    const err = await resolvePublicAddresses('no-such-host.invalid', false).catch((e: unknown) => e);
    expect((err as AddressRefusedError).message).toBe('the host no-such-host.invalid does not resolve to public addresses only');
  });
});
