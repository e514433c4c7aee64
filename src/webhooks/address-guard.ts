// SSRF guard: a webhook URL's host is resolved and refused when any of its addresses is not
// public. Used when an endpoint is created or its URL changed, before every delivery, and inside
// the connection itself (the socket's lookup), so the socket only ever connects to an address
// that was checked, even if DNS answers differently between the check and the connect.
import dns from 'node:dns';
import type { LookupAddress, LookupOptions } from 'node:dns';
import net from 'node:net';
import { isPublicAddress } from '../domain/webhooks.js';

/**
 * The message is safe to show the merchant: it never names what a host name resolved to (that
 * would map the service's internal DNS for anyone who can register an endpoint). `detail` does,
 * for the service's own logs.
 */
export class AddressRefusedError extends Error {
  override readonly name = 'AddressRefusedError';
  constructor(message: string, readonly detail: string) {
    super(message);
  }
}

const bare = (hostname: string) => hostname.replace(/^\[(.*)\]$/, '$1');

/** The host's addresses, all public (or any, when private networks are allowed); throws AddressRefusedError. */
export async function resolvePublicAddresses(hostname: string, allowPrivate: boolean): Promise<LookupAddress[]> {
  const host = bare(hostname);
  let addresses: LookupAddress[];
  if (net.isIP(host)) {
    addresses = [{ address: host, family: net.isIP(host) }];
  } else {
    try {
      addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
    } catch (err) {
      // Said like a private answer: "does not exist" against "exists inside" would tell names apart.
      throw new AddressRefusedError(notPublic(host), `the host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  check(host, addresses, allowPrivate);
  return addresses;
}

const notPublic = (host: string) =>
  net.isIP(host) ? `the address ${host} is not a public address` : `the host ${host} does not resolve to public addresses only`;

function check(host: string, addresses: LookupAddress[], allowPrivate: boolean): void {
  if (addresses.length === 0) throw new AddressRefusedError(notPublic(host), `the host ${host} has no address`);
  if (allowPrivate) return;
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused) throw new AddressRefusedError(notPublic(host), `the host ${host} resolves to ${refused.address}, which is not a public address`);
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for net/tls.connect that resolves and checks, so a connection only reaches checked addresses. */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolvePublicAddresses(hostname, allowPrivate).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
        if (wanted.length === 0) return callback(Object.assign(new Error(`no IPv${options.family} address for ${hostname}`), { code: 'ENOTFOUND' }), []);
        if (options.all) callback(null, wanted);
        else callback(null, wanted[0].address, wanted[0].family);
      },
      (err: Error) => callback(Object.assign(err, { code: 'EADDRREFUSED' }), []),
    );
  };
}
