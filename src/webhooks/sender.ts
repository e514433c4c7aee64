// POSTs a signed webhook: keep-alive connections through an undici Agent whose every new socket
// resolves and checks its address (address-guard.ts); the host is checked again before every
// delivery; redirects are never followed; a 2xx within the timeout is the only success.
import { Agent, request } from 'undici';
import { AddressRefusedError, guardedLookup, resolvePublicAddresses } from './address-guard.js';

export interface SendResult {
  statusCode: number | null;
  durationMs: number;
  /** Null on a 2xx. */
  error: string | null;
}

export interface WebhookSender {
  post(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): Promise<void>;
}

export function createWebhookSender(opts: { timeoutMs: number; allowPrivate: boolean; userAgent?: string }): WebhookSender {
  const agent = new Agent({
    connect: { lookup: guardedLookup(opts.allowPrivate), timeout: opts.timeoutMs },
    keepAliveTimeout: 4_000,
    connections: 32,
  });
  return {
    async post(url, headers, body) {
      const started = performance.now();
      const elapsed = () => performance.now() - started;
      try {
        await resolvePublicAddresses(new URL(url).hostname, opts.allowPrivate);
        const res = await request(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'user-agent': opts.userAgent ?? 'invoice-lifecycle-webhooks/1', ...headers },
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
