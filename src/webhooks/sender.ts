// POSTs signed webhooks: kept-alive connections through one undici Agent, which keeps a Pool per
// endpoint origin of at most `perEndpoint` connections, and whose every new socket resolves and
// checks its address (address-guard.ts). The host is checked again before every batch of
// deliveries to it (checkHost); redirects are never followed; a 2xx within the timeout is the
// only success.
import net from 'node:net';
import { Agent, request } from 'undici';
import { withTimeout } from '../lib/with-timeout.js';
import { AddressRefusedError, guardedLookup, resolvePublicAddresses } from './address-guard.js';

export interface SendResult {
  statusCode: number | null;
  durationMs: number;
  /** Null on a 2xx. */
  error: string | null;
}

export interface WebhookSender {
  /**
   * Resolves the host and checks every address (null when public, or private networks are
   * allowed), else the attempt's error (`refused: ...`). Bounded by the timeout.
   */
  checkHost(url: string): Promise<string | null>;
  /**
   * One POST on the endpoint's kept-alive pool; never throws. An address literal is checked here
   * (a socket to an address makes no lookup); a host name is checked by every new socket's
   * lookup, and by checkHost, which the batch calls before its first request to the host.
   */
  post(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

export function createWebhookSender(opts: { timeoutMs: number; allowPrivate: boolean; perEndpoint: number; userAgent?: string }): WebhookSender {
  const agent = new Agent({
    connect: { lookup: guardedLookup(opts.allowPrivate), timeout: opts.timeoutMs },
    keepAliveTimeout: 4_000,
    // Per origin: the endpoint's pool. The delivery loop never has more in flight to one
    // endpoint, so a request never waits here for a connection (its timeout runs from the send).
    connections: opts.perEndpoint,
  });
  const userAgent = opts.userAgent ?? 'invoice-lifecycle-webhooks/1';
  return {
    async checkHost(url) {
      try {
        await withTimeout(resolvePublicAddresses(new URL(url).hostname, opts.allowPrivate), opts.timeoutMs, 'resolving the host');
        return null;
      } catch (err) {
        // resolvePublicAddresses throws only AddressRefusedError: anything else is the deadline.
        return err instanceof AddressRefusedError ? `refused: ${err.message}` : `timed out after ${opts.timeoutMs} ms`;
      }
    },
    async post(url, headers, body) {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      try {
        const host = new URL(url).hostname;
        if (net.isIP(host.replace(/^\[(.*)\]$/, '$1'))) await resolvePublicAddresses(host, opts.allowPrivate);
        const res = await request(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'user-agent': userAgent, ...headers },
          dispatcher: agent,
          signal: AbortSignal.timeout(opts.timeoutMs),
          headersTimeout: opts.timeoutMs,
          bodyTimeout: opts.timeoutMs,
        });
        // The body is not used: read it (bounded) so the connection can be reused.
        await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        const ok = res.statusCode >= 200 && res.statusCode < 300;
        const error = ok ? null : res.statusCode >= 300 && res.statusCode < 400 ? `HTTP ${res.statusCode} (redirects are not followed)` : `HTTP ${res.statusCode}`;
        return { statusCode: res.statusCode, durationMs: elapsed(), error };
      } catch (err) {
        return { statusCode: null, durationMs: elapsed(), error: describe(err, opts.timeoutMs) };
      }
    },
    async close() {
      await agent.close();
    },
  };
}

function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof AddressRefusedError) return `refused: ${err.message}`;
  const e = err as { name?: string; code?: string; message?: string; cause?: { message?: string; code?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT') {
    return `timed out after ${timeoutMs} ms`;
  }
  if (e.code === 'EADDRREFUSED') return `refused: ${e.message}`;
  return [e.code, e.message ?? String(err), e.cause?.message].filter(Boolean).join(': ');
}
