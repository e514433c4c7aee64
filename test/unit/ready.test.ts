// What `npm start` says last: the ready block (terminal) and the `ready` line (JSON) it is built from.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { prettyLogs } from '../../src/log.js';
import { formatReadyBlock, NO_CHAINS, readyInfo, type ReadyInput } from '../../src/runtime/ready.js';

const DB = 'postgres://postgres:s3cret@127.0.0.1:41234/invoices';
const psql = 'PGPASSFILE=/srv/pg/pgpass psql -h 127.0.0.1 -p 41234 -U postgres invoices';

function input(env: Record<string, string> = {}, extra: Partial<ReadyInput> = {}): ReadyInput {
  return { config: loadConfig({ DATABASE_URL: DB, ...env }), apiPort: 3000, metricsPort: 9464, workerPort: 3001, psql, watchedChains: [], ...extra };
}

describe('the ready block', () => {
  it('says where the API, the payment page, metrics, worker, mail, database and psql are, and that no chain is watched', () => {
    const info = readyInfo(input({ MAIL_OUTBOX_DIR: '/srv/outbox' }));
    expect(info).toEqual({
      api_url: 'http://127.0.0.1:3000',
      payment_page: 'http://localhost:3000/pay/<invoice reference or payment link id>',
      dashboard: 'off (set ADMIN_USER and ADMIN_PASSWORD to turn it on)',
      metrics_url: 'http://127.0.0.1:9464/metrics',
      worker_url: 'http://127.0.0.1:3001/readyz',
      mail: { live: '.eml files in /srv/outbox', sandbox: '.eml files in /srv/outbox' },
      queue_backend: 'postgres',
      database: 'postgres://postgres:***@127.0.0.1:41234/invoices',
      psql,
      chains: [],
    });
    const block = formatReadyBlock(info);
    expect(block).not.toContain('s3cret');
    const lines = block.trim().split('\n');
    expect(lines[0]).toBe('Ready.');
    for (const [label, value] of [
      ['API', 'http://127.0.0.1:3000'],
      ['payment page', info.payment_page],
      ['dashboard', 'off (set ADMIN_USER and ADMIN_PASSWORD to turn it on)'],
      ['metrics', 'http://127.0.0.1:9464/metrics'],
      ['worker', 'http://127.0.0.1:3001/readyz'],
      ['live mail', '.eml files in /srv/outbox'],
      ['psql', psql],
      ['chains', NO_CHAINS],
    ]) {
      expect(lines.some((l) => new RegExp(`^  ${label} +${value.replace(/[.*+?^${}()|[\]\\<>]/g, '\\$&')}$`).test(l)), `${label}: ${block}`).toBe(true);
    }
    expect(NO_CHAINS).toBe('no chains watched (set CHAINS_FILE or RPC_URL_<chainId>)');
  });

  it('names the dashboard when it is on, SMTP without its password, the chains watched, and localhost for every interface', () => {
    const info = readyInfo(
      input(
        { ADMIN_USER: 'ops', ADMIN_PASSWORD: 'pw', SMTP_URL: 'smtp://user:hunter2@mail.example:587', SANDBOX_SMTP_URL: 'smtp://127.0.0.1:1025', HOST: '0.0.0.0' },
        { watchedChains: ['Sepolia (11155111)', 'Base (8453)'], workerPort: null },
      ),
    );
    expect(info.api_url).toBe('http://localhost:3000');
    expect(info.dashboard).toBe('http://localhost:3000/admin/queues');
    expect(info.mail).toEqual({ live: 'SMTP smtp://user:***@mail.example:587', sandbox: 'SMTP smtp://127.0.0.1:1025' });
    expect(info.worker_url).toBeNull();
    const block = formatReadyBlock(info);
    expect(block).not.toContain('hunter2');
    expect(block).not.toMatch(/^ {2}worker /m);
    expect(block).toMatch(/^ {2}chains +Sepolia \(11155111\), Base \(8453\)$/m);
  });
});

describe('LOG_FORMAT', () => {
  it('auto is readable on a terminal and JSON otherwise; json and pretty are what they say', () => {
    expect(prettyLogs('auto', { isTTY: true })).toBe(true);
    expect(prettyLogs('auto', { isTTY: false })).toBe(false);
    expect(prettyLogs('auto', {})).toBe(false);
    expect(prettyLogs('json', { isTTY: true })).toBe(false);
    expect(prettyLogs('pretty', { isTTY: false })).toBe(true);
  });
});
