// POSTs signed webhooks over one kept-alive undici Pool per endpoint (at most `perEndpoint`
// connections, so endpoints on one host never queue behind each other), whose every new socket
// resolves and checks its address (address-guard.ts). The host is checked again before every
// claim's first request to it (checkHost); redirects are never followed; a 2xx within the timeout
// is the only success.
import net from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { withTimeout } from '../lib/with-timeout.js';
import { AddressRefusedError, guardedLookup, resolvePublicAddresses } from './address-guard.js';

/** A pool unused this long is closed (its endpoint was deleted, or went quiet). */
const POOL_IDLE_MS = 5 * 60_000;

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
  post(endpointId: string, url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

export function createWebhookSender(opts: { timeoutMs: number; allowPrivate: boolean; perEndpoint: number; userAgent?: string }): WebhookSender {
  const lookup = guardedLookup(opts.allowPrivate);
  const pools = new Map<string, { pool: Pool; lastUsed: number; inUse: number }>();
  let lastSweep = Date.now();
  // The endpoint's pool for this origin (a changed URL gets a new one; the old one ages out).
  const poolFor = (endpointId: string, origin: string) => {
    const key = `${endpointId} ${origin}`;
    let entry = pools.get(key);
    if (!entry) {
      entry = {
        pool: new Pool(origin, { connect: { lookup, timeout: opts.timeoutMs }, keepAliveTimeout: 4_000, connections: opts.perEndpoint }),
        lastUsed: Date.now(),
        inUse: 0,
      };
      pools.set(key, entry);
    }
    return entry;
  };
  const sweep = () => {
    const now = Date.now();
    if (now - lastSweep < 60_000) return;
    lastSweep = now;
    for (const [key, entry] of pools) {
      if (entry.inUse === 0 && now - entry.lastUsed > POOL_IDLE_MS) {
        pools.delete(key);
        entry.pool.close().catch(() => undefined);
      }
    }
  };
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
    async post(endpointId, url, headers, body) {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      let entry: ReturnType<typeof poolFor> | null = null;
      try {
        const target = new URL(url);
        if (net.isIP(target.hostname.replace(/^\[(.*)\]$/, '$1'))) await resolvePublicAddresses(target.hostname, opts.allowPrivate);
        entry = poolFor(endpointId, target.origin);
        entry.inUse++;
        const res: Dispatcher.ResponseData = await entry.pool.request({
          method: 'POST',
          path: `${target.pathname}${target.search}`,
          body,
          headers: { 'content-type': 'application/json', 'user-agent': userAgent, ...headers },
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
      } finally {
        if (entry) {
          entry.inUse--;
          entry.lastUsed = Date.now();
        }
        sweep();
      }
    },
    async close() {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((e) => e.pool.close()));
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
