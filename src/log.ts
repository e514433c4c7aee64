import { pino, type Logger } from 'pino';

export type { Logger };

/** The path of a request URL: a query string may carry a key (`?api_key=...`), so it never reaches a log. */
export function pathOnly(url: string | undefined): string | undefined {
  if (url === undefined) return url;
  const i = url.indexOf('?');
  return i < 0 ? url : url.slice(0, i);
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * The root logger. Secrets never reach a log line: request lines carry the path without its
 * query string and no headers, and the key headers, SMTP and database credentials are redacted
 * wherever they appear in a logged object.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      serializers: {
        req: (req: LoggedRequest) => ({
          method: req.method,
          url: pathOnly(req.url),
          host: req.host,
          remoteAddress: req.ip,
          remotePort: req.socket?.remotePort,
        }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
        err: pino.stdSerializers.err,
      },
      redact: {
        paths: [
          'req.headers["api-key"]',
          'req.headers["x-api-key"]',
          'req.headers.authorization',
          'headers["api-key"]',
          'headers["x-api-key"]',
          'headers.authorization',
          'config.databaseUrl',
          'config.smtpUrl',
          'config.adminPassword',
          'secret',
          '*.secret',
          'password',
          '*.password',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/** `postgres://user:pw@host/db` -> `postgres://user:***@host/db`, for start-up lines. */
export function redactUrl(url: string | null): string | null {
  if (!url) return url;
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '[unparseable url]';
  }
}
