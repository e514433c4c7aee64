import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The root logger. Secrets never reach a log line: the key headers, SMTP and database
 * credentials are redacted wherever they appear in a logged object.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
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
