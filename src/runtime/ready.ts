// The last thing `npm start` says: where everything is, in one place. On a terminal a block a
// person reads; otherwise one JSON log line (`ready`) with the same fields.
import path from 'node:path';
import type { Config } from '../config.js';
import { DASHBOARD_PATH } from '../http/plugins/dashboard.js';
import { redactUrl, type Logger } from '../log.js';

export interface ReadyInput {
  config: Pick<Config, 'host' | 'paymentPageBase' | 'adminUser' | 'smtpUrl' | 'sandboxSmtpUrl' | 'outboxDir' | 'queueBackend' | 'databaseUrl'>;
  apiPort: number;
  metricsPort: number;
  /** The worker's health port, when this process runs a worker. */
  workerPort: number | null;
  /** How to reach the database with psql (src/runtime/database.ts). */
  psql: string;
  /**
   * The chains this process watches for payments, one readable entry each (e.g. "local (31337),
   * 2 confirmations", followed by ", not answering at <url> (...)" when it did not answer at start:
   * `describeWatchedNow` in src/chain/chain-answers.ts). Empty: none watched.
   */
  watchedChains: readonly string[];
}

/** The fields of the ready line (snake_case, as every log line). */
export interface ReadyInfo {
  api_url: string;
  payment_page: string;
  dashboard: string;
  metrics_url: string;
  worker_url: string | null;
  mail: { live: string; sandbox: string };
  queue_backend: Config['queueBackend'];
  database: string;
  psql: string;
  chains: string[];
}

export const NO_CHAINS = 'no chains watched (set CHAINS_FILE or RPC_URL_<chainId>)';

/** An address to type in a browser for a listen address: every interface is reachable as localhost. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}

function mailDestination(smtpUrl: string | null, outboxDir: string): string {
  return smtpUrl ? `SMTP ${redactUrl(smtpUrl)}` : `.eml files in ${path.resolve(outboxDir)}`;
}

export function readyInfo(input: ReadyInput): ReadyInfo {
  const { config } = input;
  const base = (port: number) => `http://${urlHost(config.host)}:${port}`;
  const api = base(input.apiPort);
  return {
    api_url: api,
    payment_page: `${config.paymentPageBase}/<invoice reference or payment link id>`,
    dashboard: config.adminUser ? `${api}${DASHBOARD_PATH}` : 'off (set ADMIN_USER and ADMIN_PASSWORD to turn it on)',
    metrics_url: `${base(input.metricsPort)}/metrics`,
    worker_url: input.workerPort === null ? null : `${base(input.workerPort)}/readyz`,
    mail: { live: mailDestination(config.smtpUrl, config.outboxDir), sandbox: mailDestination(config.sandboxSmtpUrl, config.outboxDir) },
    queue_backend: config.queueBackend,
    database: redactUrl(config.databaseUrl) ?? '',
    psql: input.psql,
    chains: [...input.watchedChains],
  };
}

/** The block a person reads on a terminal. */
export function formatReadyBlock(info: ReadyInfo): string {
  const rows: [string, string][] = [
    ['API', info.api_url],
    ['payment page', info.payment_page],
    ['dashboard', info.dashboard],
    ['metrics', info.metrics_url],
    ...(info.worker_url ? [['worker', info.worker_url] as [string, string]] : []),
    ['live mail', info.mail.live],
    ['sandbox mail', info.mail.sandbox],
    ['queues', info.queue_backend === 'postgres' ? 'postgres (schema bullmq of the database)' : 'redis'],
    ['database', info.database],
    ['psql', info.psql],
    ['chains', info.chains.length === 0 ? NO_CHAINS : info.chains.join(', ')],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return ['', 'Ready.', ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), ''].join('\n') + '\n';
}

/** One ready block (pretty) or one `ready` log line with the same fields (JSON). */
export function announceReady(log: Logger, info: ReadyInfo, pretty: boolean, out: { write(text: string): unknown } = process.stdout): void {
  if (pretty) out.write(formatReadyBlock(info));
  else log.info({ ...info, ...(info.chains.length === 0 ? { chains_note: NO_CHAINS } : {}) }, 'ready');
}
