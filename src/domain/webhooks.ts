// Webhook rules with no I/O: endpoint URL shape, which addresses are public, signing secrets,
// the retry schedule and when an endpoint has failed long enough to be disabled.
import { randomBytes } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import type { Environment } from './environment.js';

export type Verdict<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * Endpoints per account and environment. Each one multiplies every event (a delivery, retried for
 * days when it fails), so the count is capped; one endpoint per URL for the same reason.
 */
export const MAX_WEBHOOK_ENDPOINTS = 16;

/** `whsec_` + base64 of 32 random bytes: the Standard Webhooks secret format. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** An endpoint URL: absolute, http(s), no credentials or fragment; https in live. */
export function checkEndpointUrl(raw: string, environment: Environment): Verdict<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: 'url must be an absolute URL such as https://example.com/webhooks.' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, message: 'url must use https (or http in the sandbox).' };
  if (environment === 'live' && url.protocol !== 'https:') return { ok: false, message: 'Live webhook endpoints must use https.' };
  if (url.username || url.password) return { ok: false, message: 'url must not carry credentials.' };
  if (url.hash) return { ok: false, message: 'url must not have a fragment.' };
  if (!url.hostname) return { ok: false, message: 'url must name a host.' };
  return { ok: true, value: url };
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * An IPv6 address in hex groups only (the URL standard's form). ipaddr.js reads any trailing
 * dotted quad as IPv4-mapped, so `::8.8.8.8` (IPv4-compatible, `::808:808`) would pass as 8.8.8.8.
 */
function canonicalV6(address: string): string {
  if (!address.includes(':')) return address;
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address;
  }
}

/**
 * Only globally routable unicast addresses are public: loopback, private, link-local, unique
 * local, CGNAT, multicast, reserved, unspecified, documentation ranges and the IPv6 forms that
 * embed an IPv4 address (compatible, NAT64, 6to4, Teredo) are not. IPv4-mapped IPv6 is judged as
 * its IPv4 address; any other IPv6 must be global unicast (2000::/3) outside the special ranges.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(canonicalV6(address));
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
    // Only global unicast (2000::/3) can be public. ipaddr.js calls much outside it "unicast",
    // e.g. all of ::/96 (IPv4-compatible, [::127.0.0.1] = [::7f00:1]) and [::2], which some
    // stacks route to the embedded IPv4 address or the host itself.
    else return v6.match(GLOBAL_UNICAST_V6) && v6.range() === 'unicast';
  }
  return (parsed as ipaddr.IPv4).range() === 'unicast';
}

export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
  /** How long a delivery is retried, and how long an endpoint may fail before it is disabled. */
  windowMs: number;
}

/** Wait before attempt `attemptsMade + 1`: exponential from the base, capped. */
export function retryDelayMs(policy: RetryPolicy, attemptsMade: number): number {
  return Math.min(policy.baseMs * 2 ** Math.max(0, attemptsMade - 1), policy.maxMs);
}

/** After a failed attempt: retry at this instant, or give up (null) when it would fall past the window. */
export function nextAttemptAt(policy: RetryPolicy, firstAttemptAt: Date, attemptsMade: number, now: Date): Date | null {
  const next = new Date(now.getTime() + retryDelayMs(policy, attemptsMade));
  return next.getTime() - firstAttemptAt.getTime() > policy.windowMs ? null : next;
}

/**
 * An endpoint is disabled when no attempt succeeded for the whole window: failing since
 * `failingSince` for at least the window, or a delivery given up after retrying for its whole
 * window (`gaveUpFirstAttemptAt`, its first attempt) while the endpoint never answered 2xx since.
 */
export function shouldDisableEndpoint(policy: RetryPolicy, failingSince: Date | null, now: Date, gaveUpFirstAttemptAt: Date | null = null): boolean {
  if (failingSince === null) return false;
  if (now.getTime() - failingSince.getTime() >= policy.windowMs) return true;
  return gaveUpFirstAttemptAt !== null && failingSince.getTime() <= gaveUpFirstAttemptAt.getTime();
}

/** Attempts the default policy makes within its window (for the documentation and a unit test). */
export function attemptsWithin(policy: RetryPolicy): number {
  let elapsed = 0;
  let attempts = 1;
  for (;;) {
    const wait = retryDelayMs(policy, attempts);
    if (elapsed + wait > policy.windowMs) return attempts;
    elapsed += wait;
    attempts += 1;
  }
}
