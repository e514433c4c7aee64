// A real HTTP receiver on loopback for the webhook tests and the benchmark. It verifies every
// request's signature with the `standardwebhooks` library (as a merchant's receiver would) and
// records what arrived; each path can be told how to answer (a status code, or hang).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  path: string;
  webhookId: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The parsed event. */
  event: { id: string; type: string; created_at: string; environment: string; data: { object: Record<string, unknown> } };
  /** Index of each configured secret of the path that verifies this request (empty: none did). */
  verifiedWith: number[];
  status: number;
  at: number;
}

export type Answer = number | 'hang';

export interface WebhookReceiver {
  port: number;
  url(path: string): string;
  received: Received[];
  /** Secrets the requests to `path` are verified with. */
  setSecrets(path: string, secrets: string[]): void;
  /** How to answer the n-th request (1-based) to `path`; default 200. */
  answer(path: string, fn: (n: number) => Answer): void;
  /** Answers every request left hanging with this status. */
  release(status?: number): void;
  waitFor(pred: (all: Received[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  /** Requests that arrived, verified or not, to `path`. */
  at(path: string): Received[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(port = 0): Promise<WebhookReceiver> {
  const secrets = new Map<string, string[]>();
  const answers = new Map<string, (n: number) => Answer>();
  const counts = new Map<string, number>();
  const received: Received[] = [];
  const hanging = new Set<ServerResponse>();
  const listeners = new Set<() => void>();

  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const path = (req.url ?? '/').split('?')[0];
    const n = (counts.get(path) ?? 0) + 1;
    counts.set(path, n);
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    const verifiedWith: number[] = [];
    (secrets.get(path) ?? []).forEach((secret, i) => {
      try {
        new Webhook(secret).verify(body, headers);
        verifiedWith.push(i);
      } catch {
        // not signed with this secret
      }
    });
    const answer = answers.get(path)?.(n) ?? 200;
    let event: Received['event'];
    try {
      event = JSON.parse(body) as Received['event'];
    } catch {
      event = { id: '', type: '', created_at: '', environment: '', data: { object: {} } };
    }
    received.push({
      path,
      webhookId: headers['webhook-id'],
      timestamp: headers['webhook-timestamp'],
      signature: headers['webhook-signature'],
      body,
      event,
      verifiedWith,
      status: answer === 'hang' ? 0 : answer,
      at: Date.now(),
    });
    for (const l of listeners) l();
    if (answer === 'hang') {
      hanging.add(res);
      return;
    }
    res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'no');
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = (server.address() as AddressInfo).port;

  return {
    port: actual,
    url: (path) => `http://127.0.0.1:${actual}${path}`,
    received,
    setSecrets: (path, s) => void secrets.set(path, s),
    answer: (path, fn) => void answers.set(path, fn),
    release(status = 200) {
      for (const res of hanging) res.writeHead(status).end();
      hanging.clear();
    },
    at: (path) => received.filter((r) => r.path === path),
    waitFor(pred, timeoutMs = 20_000, what = 'webhooks') {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pred(received)) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`receiver: ${what} not seen within ${timeoutMs} ms; got ${received.map((r) => `${r.path} ${r.event.type}`).join(', ')}`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
