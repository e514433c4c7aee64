// The only reader of process.env. Every variable is parsed and checked here, once, at start;
// a bad value throws ConfigError naming the variable, and the entrypoint turns that into one
// line on stderr and exit code 1.
import { availableParallelism } from 'node:os';
import { Duration } from 'luxon';
import type { ReminderPolicy } from './domain/reminder-schedule.js';
import { LOG_FORMATS, type LogFormat } from './log.js';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`invalid configuration: ${variable} ${message}`);
  }
}

export type QueueBackendKind = 'redis' | 'postgres';
export const QUEUE_BACKENDS: readonly QueueBackendKind[] = ['redis', 'postgres'];

export interface Config {
  /** Always set here: with DATABASE_URL unset, the entrypoints start an embedded PostgreSQL first (src/runtime/database.ts). */
  databaseUrl: string;
  /** Where the embedded PostgreSQL keeps its data when DATABASE_URL is unset. */
  embeddedPostgresDir: string;
  /** Where BullMQ keeps its jobs: Redis, or the `bullmq` schema of the service's own database. */
  queueBackend: QueueBackendKind;
  /**
   * Null with the Postgres backend: no Redis is ever reached. With REDIS_CLUSTER_NODES it is not
   * dialled, only read for credentials and TLS (`rediss://user:pass@any-host`).
   */
  redisUrl: string | null;
  /**
   * REDIS_CLUSTER_NODES: startup nodes of a Redis Cluster (Redis backend only). When set, every
   * queue, worker and the service's own Redis calls go through ioredis's Cluster client.
   */
  redisClusterNodes: RedisNode[] | null;
  /** Prefix of every BullMQ key in Redis; tests give each run its own. */
  redisPrefix: string;
  port: number;
  /** Listen address of the API, its METRICS_PORT and the WORKER_PORT; containers set 0.0.0.0. */
  host: string;
  /** When null, emails are written as .eml files into outboxDir instead of sent. */
  smtpUrl: string | null;
  /** Sandbox mail goes here when set, otherwise to outboxDir; never to smtpUrl. */
  sandboxSmtpUrl: string | null;
  smtpPoolSize: number;
  outboxDir: string;
  mailFrom: string;
  paymentPageBase: string;
  logLevel: string;
  /** LOG_FORMAT: readable lines (`pretty`), JSON, or `auto` (pretty on a terminal). */
  logFormat: LogFormat;
  workerConcurrency: number;
  workerPort: number;
  /** WORKER_PORT unset: when 3001 is taken another free port will do. */
  workerPortFallback: boolean;
  /** The API's internal Prometheus port (/metrics is not on the public port). */
  metricsPort: number;
  /** METRICS_PORT unset: when 9464 is taken another free port will do. */
  metricsPortFallback: boolean;
  /** Bound on receiving a request's headers and body; a slower client gets 408 and is cut off. */
  httpRequestTimeoutMs: number;
  /** Failed authentications per client address per window before its requests get 429. */
  authFailureLimit: number;
  authFailureWindowMs: number;
  /** BullMQ lock of an active job; a worker that dies loses it after this long and the job is retried. */
  workerLockDurationMs: number;
  workerStalledIntervalMs: number;
  platformFeeBps: number;
  bodyLimitBytes: number;
  rateLimitMax: number;
  rateLimitWindowMs: number;
  adminUser: string | null;
  adminPassword: string | null;
  outboxRelayIntervalMs: number;
  shutdownTimeoutMs: number;
  /** Threads rendering PDFs off the event loop, per process; 0 renders on the main thread. */
  pdfRenderThreads: number;
  reminders: ReminderPolicy & { defaultTimeZone: string };
  reconcileEvery: Duration;
  /**
   * REMINDER_SHARDS: how many queues the reminder schedulers are spread over (each with a hash tag
   * of its own). Default 1 on single Redis (more queues on one node buy nothing), 12 on a Redis
   * Cluster (4 per master on 3 masters; a multiple of the master count spreads evenly).
   */
  reminderShards: number;
  webhooks: WebhookConfig;
  events: { retentionDays: number; pruneEvery: Duration };
}

export interface WebhookConfig {
  /** A delivery succeeds on a 2xx within this time. */
  timeoutMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** How long a delivery is retried; an endpoint failing this long is disabled. */
  retryWindowMs: number;
  /** Local development and tests only: deliver to loopback and private addresses. */
  allowPrivateNetworks: boolean;
  /** Deliveries in flight per worker process. */
  concurrency: number;
}

/** A Redis Cluster startup node. */
export interface RedisNode {
  host: string;
  port: number;
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  return v;
}

function optional(env: Env, name: string): string | null {
  const v = env[name];
  return v === undefined || v === '' ? null : v;
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, fallback: string | null, protocols: string[]): string | null {
  const raw = optional(env, name) ?? fallback;
  if (raw === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use one of ${protocols.join(', ')} (got ${parsed.protocol})`);
  }
  if ((parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hostname === '') {
    throw new ConfigError(name, 'must be an absolute URL with a host');
  }
  return raw;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function duration(env: Env, name: string, fallback: string): Duration {
  const raw = str(env, name, fallback);
  const d = Duration.fromISO(raw);
  if (!d.isValid || d.toMillis() <= 0) {
    throw new ConfigError(name, `must be a positive ISO-8601 duration such as P1D or PT2S, got "${raw}"`);
  }
  return d;
}

function timeZone(env: Env, name: string, fallback: string): string {
  const raw = str(env, name, fallback);
  try {
    // Canonical spelling: "europe/paris" is stored as "Europe/Paris".
    return new Intl.DateTimeFormat('en-US', { timeZone: raw }).resolvedOptions().timeZone;
  } catch {
    throw new ConfigError(name, `must be an IANA time zone such as Europe/Paris, got "${raw}"`);
  }
}

/** `host:port,host:port`; IPv6 hosts in brackets (`[::1]:7000`). */
function redisNodes(env: Env, name: string): RedisNode[] | null {
  const raw = optional(env, name);
  if (raw === null) return null;
  const nodes = raw.split(',').map((part) => part.trim()).filter((part) => part !== '');
  if (nodes.length === 0) throw new ConfigError(name, 'must list at least one host:port');
  return nodes.map((node) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(node);
    const port = m ? Number(m[2]) : NaN;
    if (!m || port < 1 || port > 65535) throw new ConfigError(name, `must be comma-separated host:port pairs, got "${node}"`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port };
  });
}

function databaseUrlOf(env: Env): string {
  const value = url(env, 'DATABASE_URL', null, ['postgres:', 'postgresql:']);
  if (value === null) throw new ConfigError('DATABASE_URL', 'is unset: start the service through its commands, which then run an embedded PostgreSQL');
  return value;
}

/**
 * DATABASE_URL unset: the folder of the embedded PostgreSQL the commands start (or find) before
 * loading the configuration with its URL. Null when DATABASE_URL is set.
 */
export function embeddedPostgresDirOf(env: Env): string | null {
  if (optional(env, 'DATABASE_URL') !== null) return null;
  return str(env, 'EMBEDDED_POSTGRES_DIR', 'var/postgres');
}

/** Unset: Redis when one is configured, otherwise Postgres (nothing to install but the database). */
function queueBackendOf(env: Env): QueueBackendKind {
  const raw = optional(env, 'QUEUE_BACKEND');
  if (raw === null) return optional(env, 'REDIS_URL') !== null || optional(env, 'REDIS_CLUSTER_NODES') !== null ? 'redis' : 'postgres';
  if (!(QUEUE_BACKENDS as readonly string[]).includes(raw)) throw new ConfigError('QUEUE_BACKEND', `must be ${QUEUE_BACKENDS.join(' or ')}, got "${raw}"`);
  return raw as QueueBackendKind;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const logLevel = str(env, 'LOG_LEVEL', 'info');
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = str(env, 'LOG_FORMAT', 'auto');
  if (!(LOG_FORMATS as readonly string[]).includes(logFormat)) throw new ConfigError('LOG_FORMAT', `must be one of ${LOG_FORMATS.join(', ')}, got "${logFormat}"`);
  const adminUser = optional(env, 'ADMIN_USER');
  const adminPassword = optional(env, 'ADMIN_PASSWORD');
  if ((adminUser === null) !== (adminPassword === null)) {
    throw new ConfigError(adminUser === null ? 'ADMIN_USER' : 'ADMIN_PASSWORD', 'must be set together with its pair');
  }
  const prefix = str(env, 'REDIS_PREFIX', 'bull');
  const queueBackend = queueBackendOf(env);
  // Braces would add a second hash tag to every key; the service puts its own on each queue.
  if (/[\s{}]/.test(prefix)) throw new ConfigError('REDIS_PREFIX', 'must not contain spaces or braces');
  const clusterNodes = redisNodes(env, 'REDIS_CLUSTER_NODES');
  // A Redis Cluster only carries BullMQ's Redis backend; the Postgres backend reaches no Redis.
  if (clusterNodes !== null && queueBackend !== 'redis') {
    throw new ConfigError('REDIS_CLUSTER_NODES', `needs QUEUE_BACKEND=redis (got ${queueBackend}): unset one of them`);
  }
  const config: Config = {
    databaseUrl: databaseUrlOf(env),
    embeddedPostgresDir: str(env, 'EMBEDDED_POSTGRES_DIR', 'var/postgres'),
    queueBackend,
    redisUrl: queueBackend === 'redis' ? url(env, 'REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']) : null,
    redisClusterNodes: clusterNodes,
    redisPrefix: prefix,
    port: int(env, 'PORT', 3000, 0, 65535),
    host: str(env, 'HOST', '127.0.0.1'),
    smtpUrl: url(env, 'SMTP_URL', null, ['smtp:', 'smtps:']),
    sandboxSmtpUrl: url(env, 'SANDBOX_SMTP_URL', null, ['smtp:', 'smtps:']),
    smtpPoolSize: int(env, 'SMTP_POOL_SIZE', 5, 1, 100),
    outboxDir: str(env, 'MAIL_OUTBOX_DIR', 'var/outbox'),
    mailFrom: str(env, 'MAIL_FROM', 'Invoices <invoices@example.com>'),
    paymentPageBase: url(env, 'PAYMENT_PAGE_BASE', 'http://localhost:3000/pay', ['http:', 'https:'])!.replace(/\/+$/, ''),
    logLevel,
    logFormat: logFormat as LogFormat,
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 8, 1, 1000),
    workerPort: int(env, 'WORKER_PORT', 3001, 0, 65535),
    workerPortFallback: optional(env, 'WORKER_PORT') === null,
    metricsPort: int(env, 'METRICS_PORT', 9464, 0, 65535),
    metricsPortFallback: optional(env, 'METRICS_PORT') === null,
    httpRequestTimeoutMs: int(env, 'HTTP_REQUEST_TIMEOUT_MS', 10_000, 100, 600_000),
    authFailureLimit: int(env, 'AUTH_FAILURE_LIMIT', 20, 1, 1_000_000),
    authFailureWindowMs: int(env, 'AUTH_FAILURE_WINDOW_MS', 60_000, 1_000, 86_400_000),
    workerLockDurationMs: int(env, 'WORKER_LOCK_DURATION_MS', 30_000, 1_000, 3_600_000),
    workerStalledIntervalMs: int(env, 'WORKER_STALLED_INTERVAL_MS', 30_000, 1_000, 3_600_000),
    platformFeeBps: int(env, 'PLATFORM_FEE_BPS', 50, 0, 10000),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 104_857_600),
    rateLimitMax: int(env, 'RATE_LIMIT_MAX', 1000, 0, 1_000_000_000),
    rateLimitWindowMs: int(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 1, 86_400_000),
    adminUser,
    adminPassword,
    outboxRelayIntervalMs: int(env, 'OUTBOX_RELAY_INTERVAL_MS', 1000, 50, 3_600_000),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    pdfRenderThreads: int(env, 'PDF_RENDER_THREADS', Math.min(4, availableParallelism()), 0, 64),
    reminders: {
      beforeStart: duration(env, 'REMINDERS_BEFORE_START', 'P3D'),
      beforeEvery: duration(env, 'REMINDERS_BEFORE_EVERY', 'P1D'),
      afterStart: duration(env, 'REMINDERS_AFTER_START', 'P1D'),
      afterEvery: duration(env, 'REMINDERS_AFTER_EVERY', 'P7D'),
      afterMax: int(env, 'REMINDERS_AFTER_MAX', 4, 0, 1000),
      localHour: int(env, 'REMINDERS_LOCAL_HOUR', 9, 0, 23),
      defaultTimeZone: timeZone(env, 'REMINDERS_DEFAULT_TIME_ZONE', 'UTC'),
    },
    reconcileEvery: duration(env, 'RECONCILE_EVERY', 'PT1M'),
    reminderShards: int(env, 'REMINDER_SHARDS', clusterNodes === null ? 1 : 12, 1, 1024),
    webhooks: {
      timeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 10, 120_000),
      backoffBaseMs: int(env, 'WEBHOOK_BACKOFF_BASE_MS', 30_000, 1, 86_400_000),
      backoffMaxMs: int(env, 'WEBHOOK_BACKOFF_MAX_MS', 7_200_000, 1, 86_400_000),
      retryWindowMs: int(env, 'WEBHOOK_RETRY_WINDOW_MS', 259_200_000, 1, 30 * 86_400_000),
      allowPrivateNetworks: bool(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
      concurrency: int(env, 'WEBHOOK_CONCURRENCY', 50, 1, 1000),
    },
    events: {
      // "Kept at least 30 days": a shorter retention is refused.
      retentionDays: int(env, 'EVENTS_RETENTION_DAYS', 30, 30, 3650),
      pruneEvery: duration(env, 'EVENTS_PRUNE_EVERY', 'PT1H'),
    },
  };
  return Object.freeze(config);
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

