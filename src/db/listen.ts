// A dedicated connection LISTENing on a channel, reconnecting after a loss. Notifications sent
// while it was down are lost; callers must have another way to converge (the reconciler).
import pg from 'pg';
import type { Logger } from '../log.js';

export interface Listener {
  close(): Promise<void>;
}

export function listen(databaseUrl: string, channel: string, onPayload: (payload: string) => void, log: Logger): Listener {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | null = null;

  const connect = async () => {
    const c = new pg.Client({ connectionString: databaseUrl });
    c.on('notification', (msg) => {
      // An empty payload is a notification too (outbox_pending carries none).
      if (msg.channel === channel) onPayload(msg.payload ?? '');
    });
    c.on('error', (err) => {
      log.warn({ err, channel }, 'listen connection lost; reconnecting');
      c.end().catch(() => undefined);
      schedule();
    });
    try {
      await c.connect();
      await c.query(`listen ${pg.escapeIdentifier(channel)}`);
      if (closed) await c.end();
      else client = c;
    } catch (err) {
      log.warn({ err, channel }, 'could not listen; retrying');
      c.end().catch(() => undefined);
      schedule();
    }
  };
  const schedule = () => {
    client = null;
    if (!closed && !retry) {
      retry = setTimeout(() => {
        retry = null;
        void connect();
      }, 1_000);
      retry.unref();
    }
  };
  void connect();
  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => undefined);
    },
  };
}
