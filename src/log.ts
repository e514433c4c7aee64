import { pino, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';

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

/** LOG_FORMAT: `auto` is `pretty` when stdout is a terminal, `json` otherwise (a file, a pipe, a collector). */
export type LogFormat = 'auto' | 'json' | 'pretty';
export const LOG_FORMATS: readonly LogFormat[] = ['auto', 'json', 'pretty'];

/** Whether a process's log lines are written for a person (pino-pretty) rather than as JSON. */
export function prettyLogs(format: LogFormat, stdout: { isTTY?: boolean } = process.stdout): boolean {
  return format === 'pretty' || (format === 'auto' && stdout.isTTY === true);
}

/** Readable lines on stdout: the time, the level, the message, then the fields on the same line. */
function prettyStdout(): pino.DestinationStream {
  // In-process and synchronous: a line is on the terminal before the next one, and before an exit.
  return pinoPretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true });
}

/** A plain object or array (data an error carries), not an instance of a class (a pg client, a socket). */
function isPlainData(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return Array.isArray(v) || proto === Object.prototype || proto === null;
}

/**
 * pino's error serializer, less what an error carries that is an instance of a class: a pg error
 * from the queue backend's pool carried its whole client, about a hundred lines per warning, at
 * each connection a shutdown ended. Its causes are serialized the same way.
 */
function serializeError(err: Error): Record<string, unknown> {
  const out = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(out)) {
    if (key === 'cause' || key === 'aggregateErrors' || value === null || typeof value !== 'object') continue;
    if (!isPlainData(value)) delete out[key];
  }
  return out;
}

/**
 * The root logger. Secrets never reach a log line: request lines carry the path without its
 * query string and no headers, and the key headers, SMTP and database credentials are redacted
 * wherever they appear in a logged object. `pretty` (with no destination): readable lines on
 * stdout instead of JSON.
 */
export function createLogger(level: string, destination?: pino.DestinationStream, opts: { pretty?: boolean } = {}): Logger {
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
        err: serializeError,
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
    destination ?? (opts.pretty ? prettyStdout() : undefined),
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
