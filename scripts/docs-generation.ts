// The generated parts of the docs, as pure functions of their sources: the errors table of
// docs/api.md from src/errors.ts; the variables table of docs/configuration.md and .env.example
// from the configuration schema (src/config-schema.ts). `npm run docs:generate` writes them (scripts/generate-docs.ts);
// test/unit/docs.test.ts fails when a committed file differs from what this produces.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CONFIG_GROUPS, configVariables, type ConfigVariable } from '../src/config-schema.js';
import { ERROR_WHEN, errorCatalogue } from '../src/errors.js';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface GeneratedFile {
  /** Relative to the repository root. */
  path: string;
  content: string;
}

const cell = (text: string): string => text.replace(/\|/g, '\\|');

export function errorsTable(): string {
  const rows = errorCatalogue().map(({ code, status }) => `| \`${code}\` | ${status} | ${cell(ERROR_WHEN[code])} |`);
  return ['| Code | Status | When |', '|---|---|---|', ...rows].join('\n');
}

function defaultOf(v: ConfigVariable): string {
  if (v.defaultText !== undefined) return v.defaultText;
  if (v.default === undefined) return 'unset';
  return `\`${String(v.default)}\``;
}

const schemes = (v: ConfigVariable) => (v.protocols ?? []).map((p) => p.replace(/:$/, '')).join(', ');

function valuesOf(v: ConfigVariable): string {
  switch (v.kind) {
    case 'integer':
      return `integer, ${v.minimum!.toLocaleString('en-US')}..${v.maximum!.toLocaleString('en-US')}`;
    case 'string':
      return 'text';
    case 'url':
      return `URL (${schemes(v)})`;
    case 'boolean':
      return '`true` or `false`';
    case 'duration':
      return 'ISO-8601 duration (`PT30S`, `P1D`)';
    case 'durations':
      return 'comma-separated ISO-8601 durations, increasing';
    case 'timeZone':
      return 'IANA time zone';
    case 'oneOf':
      return v.values!.map((x) => `\`${x}\``).join(', ');
    case 'hostPorts':
      return '`host:port` list';
    case 'rpcUrls':
      return `comma-separated URLs (${schemes(v)})`;
    case 'privateKeys':
      return '64 hexadecimal characters, `0x` optional';
  }
}

export function configurationTables(): string {
  const variables = configVariables();
  return CONFIG_GROUPS.flatMap((group) => {
    const rows = variables.filter((v) => v.group === group).map((v) => `| \`${v.env}\` | ${cell(defaultOf(v))} | ${cell(valuesOf(v))} | ${cell(v.description)} |`);
    return [`### ${group}`, '', '| Variable | Default | Values | Meaning |', '|---|---|---|---|', ...rows, ''];
  })
    .join('\n')
    .trimEnd();
}

/** Markdown to plain comment text: links keep their words, code and bold marks go. */
const plain = (md: string) => md.replace(/\[([^\]]+)\]\([^)]+\)/g, '$1').replace(/`|\*\*/g, '');

function commentLines(text: string, width = 98): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/)) {
    if (line.length + 1 + word.length > width && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  return [...lines, line];
}

/**
 * Values of .env.example that point at the compose services: uncommented ones are what
 * docker-compose.yml passes by default anyway (shown so they are easy to change), commented ones
 * show the shape of a value.
 */
const COMPOSE_VALUES: Record<string, { value: string; active: boolean; note?: string }> = {
  DATABASE_URL: { value: 'postgres://postgres:postgres@postgres:5432/invoices', active: false, note: 'Compose default: its postgres service.' },
  REDIS_URL: { value: 'redis://redis:6379', active: false, note: 'Compose default: its redis service.' },
  REDIS_CLUSTER_NODES: { value: 'redis-1:6379,redis-2:6379,redis-3:6379', active: false },
  PORT: { value: '3000', active: true, note: 'Inside its container, and published on the host.' },
  PAYMENT_PAGE_BASE: { value: 'http://localhost:3000/pay', active: true },
  SMTP_URL: {
    value: 'smtp://mailpit:1025',
    active: true,
    note: 'Compose default: Mailpit, whose web UI (http://localhost:8025) shows every email sent. For a real server: smtp://user:password@smtp.example.com:587 (or smtps://...:465).',
  },
  SANDBOX_SMTP_URL: { value: 'smtp://mailpit:1025', active: true },
  MAIL_FROM: { value: '"Invoices <invoices@example.com>"', active: true },
  WORKER_CONCURRENCY: { value: '8', active: true, note: 'Each `--scale worker=N` replica runs this many.' },
  WORKER_PORT: { value: '3001', active: true, note: 'Inside its container only.' },
  SHUTDOWN_TIMEOUT_MS: { value: '10000', active: true, note: "Keep it below the services' stop_grace_period (20s)." },
  ADMIN_USER: { value: '', active: true, note: 'Set both to turn the dashboard on, leave both empty to keep it off.' },
  ADMIN_PASSWORD: { value: '', active: true },
  LOG_LEVEL: { value: 'info', active: true },
  HOST: { value: '0.0.0.0', active: false, note: 'Compose default: 0.0.0.0, every interface of the container.' },
  CHAINS_FILE: {
    value: '/app/chains/chains.json',
    active: false,
    note: 'Compose: a path inside the containers; put the file in ./chains/, which is mounted at /app/chains.',
  },
  RELAYER_PRIVATE_KEY_FILE: {
    value: '/app/chains/relayer.key',
    active: false,
    note: 'Compose: a path inside the containers (./chains is mounted at /app/chains); the file must be mode 600 and owned by the user the service runs as.',
  },
  'RELAYER_PRIVATE_KEY_<chainId>': {
    value: '',
    active: false,
    note: 'The key itself for one chain (this one: Base, 8453); from .env only (env_file), like RPC_URL_<chainId>. Prefer RELAYER_PRIVATE_KEY_FILE: a file keeps the key out of the environment.',
  },
  'RPC_URL_<chainId>': {
    value: 'https://mainnet.base.org',
    active: false,
    note: 'One line per chain, the chain id in the name (this one: Base, 8453). Compose passes them from .env only (env_file): one exported in the shell does not reach the containers.',
  },
};

/** The name an example line of .env.example gives a family of variables (RPC_URL_<chainId>). */
const FAMILY_EXAMPLE_NAMES: Record<string, string> = { 'RPC_URL_<chainId>': 'RPC_URL_8453', 'RELAYER_PRIVATE_KEY_<chainId>': 'RELAYER_PRIVATE_KEY_8453' };

/** The variables docker-compose.yml passes through (`${NAME:-default}`), which .env.example is for. */
export function composeVariables(composeText: string): Set<string> {
  const code = composeText
    .split('\n')
    .filter((line) => !line.trim().startsWith('#'))
    .join('\n');
  return new Set([...code.matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]));
}

export function envExample(composeText: string): string {
  const passed = composeVariables(composeText);
  const known = new Set(configVariables().map((v) => v.env));
  const unknown = [...passed].filter((n) => !known.has(n));
  if (unknown.length > 0) throw new Error(`docker-compose.yml passes variables the configuration schema does not name: ${unknown.join(', ')}`);
  // Every documented variable can be set for the compose stack: each by name, a family through env_file.
  const missing = configVariables().filter((v) => v.envPattern === undefined && !passed.has(v.env));
  if (missing.length > 0) throw new Error(`docker-compose.yml does not pass ${missing.map((v) => v.env).join(', ')}: add \${NAME:-} to x-app-env`);
  const out = [
    '# Generated from src/config-schema.ts by `npm run docs:generate`: edit the schema, not this file.',
    '# Copy to `.env` (git-ignored) to change what docker compose passes to api, worker and migrate.',
    "# Every line is optional: docker-compose.yml has a default for each, and an empty value means the",
    "# code's own default. Every variable of docs/configuration.md is here.",
  ];
  for (const group of CONFIG_GROUPS) {
    const vars = configVariables().filter((v) => v.group === group);
    if (vars.length === 0) continue;
    out.push('', `# --- ${group} ---`);
    for (const v of vars) {
      const compose = COMPOSE_VALUES[v.env];
      const fallback = v.default === undefined ? '' : String(v.default);
      const values = v.kind === 'integer' || v.kind === 'oneOf' ? ` (${plain(valuesOf(v))})` : '';
      out.push(...commentLines(`${plain(v.description)}${values}.${compose?.note ? ` ${plain(compose.note)}` : ''}`));
      const name = FAMILY_EXAMPLE_NAMES[v.env] ?? v.env;
      out.push(compose?.active ? `${name}=${compose.value}` : `# ${name}=${compose?.value ?? fallback}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/**
 * Replaces what lies between `<!-- BEGIN GENERATED: name ... -->` and `<!-- END GENERATED: name -->`;
 * the markers stay, so the hand-written text around them is kept.
 */
export function replaceSection(text: string, name: string, body: string): string {
  const begin = new RegExp(`<!-- BEGIN GENERATED: ${name}\\b[^>]*-->\\n`);
  const end = `<!-- END GENERATED: ${name} -->`;
  const b = begin.exec(text);
  const e = text.indexOf(end);
  if (!b || e < b.index) throw new Error(`markers of the generated section "${name}" not found`);
  const start = b.index + b[0].length;
  return `${text.slice(0, start)}${body}\n${text.slice(e)}`;
}

/** Every generated file, as it should be committed, given the current text of each (`read`). */
export function generatedFiles(read: (path: string) => string = (p) => readFileSync(ROOT + p, 'utf8')): GeneratedFile[] {
  return [
    { path: 'docs/api.md', content: replaceSection(read('docs/api.md'), 'errors', errorsTable()) },
    { path: 'docs/configuration.md', content: replaceSection(read('docs/configuration.md'), 'variables', configurationTables()) },
    { path: '.env.example', content: envExample(read('docker-compose.yml')) },
  ];
}
