// The only reader of process.env. Every variable of the schema (src/config-schema.ts) is parsed
// and checked here, once, at start; a bad value throws ConfigError naming the variable, and the
// entrypoint turns that into one line on stderr and exit code 1.
import { availableParallelism } from 'node:os';
import { Duration } from 'luxon';
import { ChainsConfigError, chainUrlProblem, loadChains } from './chains-config.js';
import type { Chain } from './domain/chains.js';
import { Secret } from './lib/secret.js';
import { parseDurationList } from './domain/subscriptions.js';
import { ConfigSchema, configVariables, type Config, type ConfigVariable, type QueueBackendKind, type RedisNode } from './config-schema.js';

export { QUEUE_BACKENDS, type Config, type QueueBackendKind, type RedisNode, type WebhookConfig } from './config-schema.js';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`invalid configuration: ${variable} ${message}`);
  }
}

type Env = Record<string, string | undefined>;

/** Unset and empty are the same: compose passes `${VAR:-}` as an empty string. */
function raw(env: Env, name: string): string | null {
  const v = env[name];
  return v === undefined || v === '' ? null : v;
}

function parseInteger(name: string, text: string, min: number, max: number): number {
  if (!/^-?\d+$/.test(text.trim())) throw new ConfigError(name, `must be an integer, got "${text}"`);
  const n = Number(text.trim());
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function parseUrl(name: string, text: string, protocols: readonly string[]): string {
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use one of ${protocols.join(', ')} (got ${parsed.protocol})`);
  }
  if ((parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname === '') {
    throw new ConfigError(name, 'must be an absolute URL with a host');
  }
  return text;
}

function parseDuration(name: string, text: string): Duration {
  const d = Duration.fromISO(text);
  if (!d.isValid || d.toMillis() <= 0) {
    throw new ConfigError(name, `must be a positive ISO-8601 duration such as P1D or PT2S, got "${text}"`);
  }
  return d;
}

function parseDurations(name: string, text: string): Duration[] {
  const parsed = parseDurationList(text);
  if (!parsed.ok) throw new ConfigError(name, parsed.message);
  return parsed.value;
}

function parseTimeZone(name: string, text: string): string {
  try {
    // Canonical spelling: "europe/paris" is stored as "Europe/Paris".
    return new Intl.DateTimeFormat('en-US', { timeZone: text }).resolvedOptions().timeZone;
  } catch {
    throw new ConfigError(name, `must be an IANA time zone such as Europe/Paris, got "${text}"`);
  }
}

/** `host:port,host:port`; IPv6 hosts in brackets (`[::1]:7000`). */
function parseHostPorts(name: string, text: string): RedisNode[] {
  const nodes = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  if (nodes.length === 0) throw new ConfigError(name, 'must list at least one host:port');
  return nodes.map((node) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(node);
    const port = m ? Number(m[2]) : NaN;
    if (!m || port < 1 || port > 65535) throw new ConfigError(name, `must be comma-separated host:port pairs, got "${node}"`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port };
  });
}

function parseOneOf(name: string, text: string, values: readonly string[]): string {
  if (values.includes(text)) return text;
  const list = values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`;
  throw new ConfigError(name, `must be ${list}, got "${text}"`);
}

/** `RPC_URL_<chainId>` variables: each a comma-separated list of http(s)/ws(s) URLs. */
function parseRpcUrls(env: Env, variable: ConfigVariable): Record<number, string[]> {
  const urls: Record<number, string[]> = {};
  for (const name of Object.keys(env).sort()) {
    const m = variable.envPattern!.exec(name);
    const text = raw(env, name);
    if (!m || text === null) continue;
    if (!/^[1-9]\d{0,15}$/.test(m[1])) throw new ConfigError(name, `must end in a chain id (a positive integer), got "${m[1]}"`);
    const list = text
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part !== '');
    if (list.length === 0) throw new ConfigError(name, 'must list at least one URL');
    for (const url of list) {
      if (chainUrlProblem(url) !== null) throw new ConfigError(name, `must be comma-separated http(s) or ws(s) URLs, got "${url}"`);
    }
    urls[Number(m[1])] = list;
  }
  return urls;
}

/**
 * `RELAYER_PRIVATE_KEY_<chainId>` variables: each one private key, `0x` and 64 hexadecimal
 * characters (`0x` optional). Held as a Secret; an error names the variable, never the value.
 */
function parsePrivateKeys(env: Env, variable: ConfigVariable): Record<number, Secret<`0x${string}`>> {
  const keys: Record<number, Secret<`0x${string}`>> = {};
  for (const name of Object.keys(env).sort()) {
    const m = variable.envPattern!.exec(name);
    const text = raw(env, name);
    if (!m || text === null) continue;
    if (!/^[1-9]\d{0,15}$/.test(m[1])) throw new ConfigError(name, `must end in a chain id (a positive integer), got "${m[1].slice(0, 20)}"`);
    const trimmed = text.trim();
    const hex = /^0x/i.test(trimmed) ? trimmed.slice(2) : trimmed;
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new ConfigError(name, 'must be one private key: 64 hexadecimal characters, 0x optional (the value is not shown)');
    keys[Number(m[1])] = new Secret<`0x${string}`>(`0x${hex.toLowerCase()}`);
  }
  return keys;
}

/** A variable's value, or undefined when it is unset and its default is computed (defaultText). */
function parseVariable(env: Env, v: ConfigVariable): unknown {
  if (v.kind === 'rpcUrls') return parseRpcUrls(env, v);
  if (v.kind === 'privateKeys') return parsePrivateKeys(env, v);
  const text = raw(env, v.env);
  if (text === null) {
    if (v.default === undefined) return v.defaultText === undefined ? null : undefined;
    if (v.kind === 'duration') return parseDuration(v.env, String(v.default));
    if (v.kind === 'durations') return parseDurations(v.env, String(v.default));
    return v.default;
  }
  switch (v.kind) {
    case 'integer':
      return parseInteger(v.env, text, v.minimum!, v.maximum!);
    case 'string':
      return text;
    case 'url':
      return parseUrl(v.env, text, v.protocols!);
    case 'boolean':
      if (text === 'true') return true;
      if (text === 'false') return false;
      throw new ConfigError(v.env, `must be true or false, got "${text}"`);
    case 'duration':
      return parseDuration(v.env, text);
    case 'durations':
      return parseDurations(v.env, text);
    case 'timeZone':
      return parseTimeZone(v.env, text);
    case 'oneOf':
      return parseOneOf(v.env, text, v.values!);
    case 'hostPorts':
      return parseHostPorts(v.env, text);
  }
}

const VARIABLES = configVariables();
const variableAt = (path: string): ConfigVariable => VARIABLES.find((v) => v.path.join('.') === path)!;
const nameOf = (path: string): string => variableAt(path).env;

/**
 * DATABASE_URL unset: the folder of the embedded PostgreSQL the commands start (or find) before
 * loading the configuration with its URL. Null when DATABASE_URL is set.
 */
export function embeddedPostgresDirOf(env: Env): string | null {
  if (raw(env, nameOf('databaseUrl')) !== null) return null;
  return parseVariable(env, variableAt('embeddedPostgresDir')) as string;
}

/** Unset: Redis when one is configured, otherwise Postgres (nothing to install but the database). */
function queueBackendOf(env: Env): QueueBackendKind {
  const given = parseVariable(env, variableAt('queueBackend')) as QueueBackendKind | undefined;
  if (given !== undefined) return given;
  return raw(env, nameOf('redisUrl')) !== null || raw(env, nameOf('redisClusterNodes')) !== null ? 'redis' : 'postgres';
}

/** Defaults that depend on other variables or on the machine; the schema's defaultText says them. */
function computedDefault(path: string, values: ReadonlyMap<string, unknown>): unknown {
  switch (path) {
    case 'databaseUrl':
      // The commands always set it (an embedded server's when unset); checkTogether says so otherwise.
      return null;
    case 'redisUrl':
      return 'redis://127.0.0.1:6379';
    case 'reminderShards':
      // 1 on single Redis (more queues on one node buy nothing); 12 on a cluster (4 per master on 3).
      return values.get('redisClusterNodes') === null ? 1 : 12;
    case 'relayerPrivateKeyFile':
      // Unset: no key for any chain but the local one (src/chain/relayer-keys.ts looks beside CHAINS_FILE).
      return null;
    case 'pdfRenderThreads':
      return Math.min(4, availableParallelism());
    default:
      throw new Error(`no computed default for ${path}`);
  }
}

/** Cross-variable rules, after each variable was parsed on its own. */
function checkTogether(env: Env, values: Map<string, unknown>): void {
  const adminUser = values.get('adminUser');
  const adminPassword = values.get('adminPassword');
  if ((adminUser === null) !== (adminPassword === null)) {
    throw new ConfigError(nameOf(adminUser === null ? 'adminUser' : 'adminPassword'), 'must be set together with its pair');
  }
  // Braces would add a second hash tag to every key; the service puts its own on each queue.
  if (/[\s{}]/.test(values.get('redisPrefix') as string)) throw new ConfigError(nameOf('redisPrefix'), 'must not contain spaces or braces');
  // A Redis Cluster only carries BullMQ's Redis backend; the Postgres backend reaches no Redis.
  const queueBackend = values.get('queueBackend');
  if (values.get('redisClusterNodes') !== null && queueBackend !== 'redis') {
    throw new ConfigError(nameOf('redisClusterNodes'), `needs QUEUE_BACKEND=redis (got ${String(queueBackend)}): unset one of them`);
  }
  if (values.get('databaseUrl') === null) {
    throw new ConfigError(nameOf('databaseUrl'), 'is unset: start the service through its commands, which then run an embedded PostgreSQL');
  }
  // Native coin in whole units with up to 18 decimals (wei): read exactly by the relayer.
  if (!/^\d{1,30}(\.\d{1,18})?$/.test(values.get('relayerMinBalance') as string)) {
    throw new ConfigError(nameOf('relayerMinBalance'), `must be an amount of the native coin such as 0.01, got "${String(values.get('relayerMinBalance')).slice(0, 40)}"`);
  }
  // Unset, the page is this API's own: on PORT's port (a fixed 3000 sent emails to another service's).
  const port = values.get('port') as number;
  if (raw(env, nameOf('paymentPageBase')) === null && port !== 0) values.set('paymentPageBase', `http://localhost:${port}/pay`);
  values.set('paymentPageBase', (values.get('paymentPageBase') as string).replace(/\/+$/, ''));
  values.set('workerPortFallback', raw(env, nameOf('workerPort')) === null);
  values.set('metricsPortFallback', raw(env, nameOf('metricsPort')) === null);
}

/** Nests the flat `a.b` paths into the objects of the schema, in its order. */
function nest(values: ReadonlyMap<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(ConfigSchema.properties)) {
    const prefix = `${key}.`;
    const children = [...values].filter(([path]) => path.startsWith(prefix));
    if (children.length === 0) out[key] = values.get(key);
    else out[key] = Object.freeze(Object.fromEntries(children.map(([path, value]) => [path.slice(prefix.length), value])));
  }
  return out;
}

export function loadConfig(env: Env = process.env): Config {
  const values = new Map<string, unknown>();
  const queueBackend = queueBackendOf(env);
  for (const v of VARIABLES) {
    const path = v.path.join('.');
    // The Postgres backend reaches no Redis: REDIS_URL is not even read.
    if (path === 'redisUrl' && queueBackend !== 'redis') values.set(path, null);
    else if (path === 'queueBackend') values.set(path, queueBackend);
    else values.set(path, parseVariable(env, v));
  }
  for (const [path, value] of values) if (value === undefined) values.set(path, computedDefault(path, values));
  checkTogether(env, values);
  try {
    values.set('chains', loadChains(values.get('chainsFile') as string | null, values.get('rpcUrls') as Record<number, string[]>));
  } catch (err) {
    if (err instanceof ChainsConfigError) throw new ConfigError(err.variable, err.message);
    throw err;
  }
  for (const id of Object.keys(values.get('relayerPrivateKeys') as Record<number, unknown>)) {
    if (!(values.get('chains') as Chain[]).some((c) => c.chainId === Number(id))) {
      throw new ConfigError(`RELAYER_PRIVATE_KEY_${id}`, `names chain ${id}, which is neither built in nor in CHAINS_FILE`);
    }
  }
  // Every value was parsed by the parser of its schema kind above, so the object is the schema's Config.
  return Object.freeze(nest(values)) as Config;
}

/** The variables that reproduce these Config fields in a child process (tests start workers so). */
export function environmentOf(config: Config, paths: readonly (keyof Config)[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const path of paths) {
    const v = variableAt(path);
    const value: unknown = config[path];
    if (value === null || value === undefined) continue;
    if (v.kind === 'hostPorts') env[v.env] = (value as RedisNode[]).map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',');
    else if (v.kind === 'duration') env[v.env] = (value as Duration).toISO() ?? '';
    else if (v.kind === 'durations') env[v.env] = (value as Duration[]).map((d) => d.toISO()).join(',');
    else if (v.kind === 'rpcUrls') for (const [id, urls] of Object.entries(value as Record<number, string[]>)) env[`RPC_URL_${id}`] = urls.join(',');
    // A child process is given the key itself: the one place a Secret is revealed outside the signer.
    else if (v.kind === 'privateKeys') for (const [id, key] of Object.entries(value as Record<number, Secret<string>>)) env[`RELAYER_PRIVATE_KEY_${id}`] = key.reveal();
    else env[v.env] = String(value);
  }
  return env;
}

/** Entrypoints call this: a bad value prints one line naming the variable and exits 1. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
