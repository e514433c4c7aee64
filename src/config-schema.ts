// Every environment variable of the service, once: its name, type, default, range and a one-line
// description, as a TypeBox schema shaped like the Config it produces. src/config.ts parses the
// environment by walking it; the Config type is its Static; docs/configuration.md's table and
// .env.example are generated from it (npm run docs:generate), and the tests read it for the names.
import type { Chain } from './domain/chains.js';
import { DEFAULT_DUNNING_SCHEDULE, DUNNING_FINAL_ACTIONS } from './domain/subscriptions.js';
import { LOG_FORMATS } from './log.js';
import type { Duration } from 'luxon';
import { Type, type Static, type TSchema } from 'typebox';
import type { Secret } from './lib/secret.js';

export const CONFIG_GROUPS = ['Database and queues', 'API', 'Email', 'Workers', 'Webhooks and events', 'Reminders', 'Chains', 'Relayer', 'Queue dashboard', 'Logs'] as const;
export type ConfigGroup = (typeof CONFIG_GROUPS)[number];

/** How a variable's text becomes its value (src/config.ts has one parser per kind). */
export type VariableKind = 'integer' | 'string' | 'url' | 'boolean' | 'duration' | 'durations' | 'timeZone' | 'oneOf' | 'hostPorts' | 'rpcUrls' | 'privateKeys';

/** What every variable carries beside its JSON Schema. */
export interface VariableMeta {
  /** The environment variable; a family's name pattern (`RPC_URL_<chainId>`) when `envPattern` is set. */
  env: string;
  kind: VariableKind;
  group: ConfigGroup;
  description: string;
  /** The default as the docs say it, when it is computed rather than a fixed `default`. */
  defaultText?: string;
  /** Accepted URL schemes, for kind `url` and `rpcUrls` (`https:`...). */
  protocols?: readonly string[];
  /** Accepted values, for kind `oneOf`. */
  values?: readonly string[];
  /** The variable is a family of names matching this (`RPC_URL_<chainId>`); the group is its first capture. */
  envPattern?: RegExp;
  minimum?: number;
  maximum?: number;
  default?: unknown;
}

type Meta = Omit<VariableMeta, 'kind'>;

const integer = (m: Meta & { minimum: number; maximum: number }) => Type.Integer({ ...m, kind: 'integer' });
const text = (m: Meta & { default: string }) => Type.String({ ...m, kind: 'string' });
const optionalText = (m: Meta) => Type.Union([Type.String(), Type.Null()], { ...m, kind: 'string' });
const url = (m: Meta & { protocols: readonly string[] }) => Type.String({ ...m, kind: 'url' });
const optionalUrl = (m: Meta & { protocols: readonly string[] }) => Type.Union([Type.String(), Type.Null()], { ...m, kind: 'url' });
const boolean = (m: Meta & { default: boolean }) => Type.Boolean({ ...m, kind: 'boolean' });
const duration = (m: Meta & { default: string }) => Type.Unsafe<Duration>({ type: 'string', ...m, kind: 'duration' });
/** Comma-separated ISO-8601 durations, increasing (DUNNING_SCHEDULE). */
const durations = (m: Meta & { default: string }) => Type.Unsafe<Duration[]>({ type: 'string', ...m, kind: 'durations' });
const timeZone = (m: Meta & { default: string }) => Type.String({ ...m, kind: 'timeZone' });
const oneOf = <const V extends readonly string[]>(values: V, m: Meta) => Type.Unsafe<V[number]>({ type: 'string', enum: values, ...m, values, kind: 'oneOf' });
/** Not a variable: set by the loader from others (documented with them). */
const derived = (description: string) => Type.Boolean({ description });

const RedisNodeSchema = Type.Object({ host: Type.String(), port: Type.Integer() });
export type RedisNode = Static<typeof RedisNodeSchema>;

export const QUEUE_BACKENDS = ['redis', 'postgres'] as const;
export type QueueBackendKind = (typeof QUEUE_BACKENDS)[number];
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const DB: ConfigGroup = 'Database and queues';

export const WebhookConfigSchema = Type.Object({
  timeoutMs: integer({ env: 'WEBHOOK_TIMEOUT_MS', group: 'Webhooks and events', default: 10_000, minimum: 10, maximum: 120_000, description: 'a webhook delivery succeeds on a 2xx within this time' }),
  backoffBaseMs: integer({ env: 'WEBHOOK_BACKOFF_BASE_MS', group: 'Webhooks and events', default: 30_000, minimum: 1, maximum: 86_400_000, description: 'first wait before a webhook retry; doubles each attempt' }),
  backoffMaxMs: integer({ env: 'WEBHOOK_BACKOFF_MAX_MS', group: 'Webhooks and events', default: 7_200_000, minimum: 1, maximum: 86_400_000, description: 'longest wait between two webhook attempts (2 h)' }),
  retryWindowMs: integer({
    env: 'WEBHOOK_RETRY_WINDOW_MS',
    group: 'Webhooks and events',
    default: 259_200_000,
    minimum: 1,
    maximum: 30 * 86_400_000,
    description: 'how long a delivery is retried (3 days); an endpoint failing this long is disabled',
  }),
  allowPrivateNetworks: boolean({
    env: 'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
    group: 'Webhooks and events',
    default: false,
    description: '`true` lets webhook endpoints point at loopback and private addresses: **for local development and tests only** (see [SSRF](events-and-webhooks.md#webhook-endpoints))',
  }),
  concurrency: integer({ env: 'WEBHOOK_CONCURRENCY', group: 'Webhooks and events', default: 50, minimum: 1, maximum: 1000, description: 'webhook deliveries in flight per worker process' }),
  endpointConcurrency: integer({
    env: 'WEBHOOK_ENDPOINT_CONCURRENCY',
    group: 'Webhooks and events',
    default: 32,
    minimum: 1,
    maximum: 1000,
    description: "webhook deliveries in flight to one endpoint per worker process (its kept-alive connection pool's size)",
  }),
});

export const ConfigSchema = Type.Object({
  databaseUrl: url({
    env: 'DATABASE_URL',
    group: DB,
    protocols: ['postgres:', 'postgresql:'],
    defaultText: 'unset: embedded',
    description: 'Postgres; the database is created if missing. Unset: an embedded PostgreSQL (see the [Quick start](../README.md#quick-start))',
  }),
  embeddedPostgresDir: text({
    env: 'EMBEDDED_POSTGRES_DIR',
    group: DB,
    default: 'var/postgres',
    description: 'folder of the embedded PostgreSQL (`data/`, `pgpass`, `postgres.log`, and `server.json` while it runs)',
  }),
  queueBackend: oneOf(QUEUE_BACKENDS, {
    env: 'QUEUE_BACKEND',
    group: DB,
    defaultText: '`redis` when `REDIS_URL` or `REDIS_CLUSTER_NODES` is set, else `postgres`',
    description:
      "where BullMQ keeps its jobs: `redis`, or `postgres` (the `bullmq` schema of the service's own database, migrated by `migrate`/`start`; no Redis connection is opened at all)",
  }),
  redisUrl: optionalUrl({
    env: 'REDIS_URL',
    group: DB,
    protocols: ['redis:', 'rediss:'],
    defaultText: '`redis://127.0.0.1:6379` with `QUEUE_BACKEND=redis`',
    description: "single-node Redis for BullMQ and the service's own Redis calls; ignored with the Postgres backend",
  }),
  redisClusterNodes: Type.Union([Type.Array(RedisNodeSchema), Type.Null()], {
    env: 'REDIS_CLUSTER_NODES',
    kind: 'hostPorts',
    group: DB,
    description:
      "`host:port,host:port,...`: startup nodes of a **Redis Cluster** (Redis backend only); when set, every queue, worker, scheduler and the service's own Redis calls use ioredis's Cluster client and `REDIS_URL` serves only for credentials/TLS (`rediss://user:pass@any`); refused with `QUEUE_BACKEND=postgres`. See [Redis Cluster and reminder shards](operations.md#redis-cluster-and-reminder-shards)",
  }),
  redisPrefix: text({
    env: 'REDIS_PREFIX',
    group: DB,
    default: 'bull',
    description:
      'prefix of every BullMQ key in Redis (no spaces or braces); each queue adds its hash tag: `bull:{invoice-send}:...`. One prefix per deployment: it is claimed for the database at start (see [One Redis prefix, one database](operations.md#one-redis-prefix-one-database))',
  }),
  reminderShards: integer({
    env: 'REMINDER_SHARDS',
    group: DB,
    minimum: 1,
    maximum: 1024,
    defaultText: '`1` (single Redis, Postgres backend), `12` (cluster)',
    description: 'number of reminder queues the schedulers are spread over, each under its own hash tag on Redis; safe to change on a running deployment',
  }),
  reconcileEvery: duration({ env: 'RECONCILE_EVERY', group: DB, default: 'PT1M', description: 'how often the reconciler makes the queue (Redis or the `bullmq` schema) match Postgres' }),

  port: integer({ env: 'PORT', group: 'API', default: 3000, minimum: 0, maximum: 65535, description: 'API port' }),
  host: text({ env: 'HOST', group: 'API', default: '127.0.0.1', description: 'listen address of the API, its `METRICS_PORT` and the `WORKER_PORT`; containers set 0.0.0.0 (the Dockerfile and compose files do)' }),
  paymentPageBase: url({
    env: 'PAYMENT_PAGE_BASE',
    group: 'API',
    protocols: ['http:', 'https:'],
    default: 'http://localhost:3000/pay',
    description:
      "the spec's `{payment_page_base}`: links are `<base>/<link_id>`, invoices `<base>/<reference>`. The default is the [payment page](payment-page-and-documents.md#payment-page) this API serves at `/pay`, on `PORT`'s port (`http://localhost:<PORT>/pay`); a deployment with its own page sets its address (the emails, PDFs and QR codes then point there)",
  }),
  demoKeysFile: text({
    env: 'DEMO_KEYS_FILE',
    group: 'API',
    default: 'var/demo-keys.json',
    description: "`npm run demo`'s own copy of the demo merchant's keys (mode 600), to print them again on the next run; a test or a second checkout of the demo names its own",
  }),
  platformFeeBps: integer({
    env: 'PLATFORM_FEE_BPS',
    group: 'API',
    default: 50,
    minimum: 0,
    maximum: 10000,
    description: 'platform fee of merchant accounts provisioned without one (`npm run demo`), in basis points',
  }),
  bodyLimitBytes: integer({ env: 'BODY_LIMIT_BYTES', group: 'API', default: 1_048_576, minimum: 1024, maximum: 104_857_600, description: 'largest accepted request body' }),
  httpRequestTimeoutMs: integer({
    env: 'HTTP_REQUEST_TIMEOUT_MS',
    group: 'API',
    default: 10_000,
    minimum: 100,
    maximum: 600_000,
    description: "a request's headers and body must arrive within this (`408` otherwise)",
  }),
  authFailureLimit: integer({
    env: 'AUTH_FAILURE_LIMIT',
    group: 'API',
    default: 20,
    minimum: 1,
    maximum: 1_000_000,
    description: '`401`s per client address per `AUTH_FAILURE_WINDOW_MS` before its requests get `429`',
  }),
  authFailureWindowMs: integer({ env: 'AUTH_FAILURE_WINDOW_MS', group: 'API', default: 60_000, minimum: 1_000, maximum: 86_400_000, description: 'window of `AUTH_FAILURE_LIMIT`' }),
  rateLimitMax: integer({ env: 'RATE_LIMIT_MAX', group: 'API', default: 1000, minimum: 0, maximum: 1_000_000_000, description: 'requests per key per `RATE_LIMIT_WINDOW_MS` on `/v1`; also requests per client address on the payment page (`/pay`)' }),
  rateLimitWindowMs: integer({ env: 'RATE_LIMIT_WINDOW_MS', group: 'API', default: 60_000, minimum: 1, maximum: 86_400_000, description: 'window of `RATE_LIMIT_MAX`' }),
  checkouts: Type.Object({
    limitPerLink: integer({
      env: 'CHECKOUT_LIMIT_PER_LINK',
      group: 'API',
      default: 10,
      minimum: 1,
      maximum: 1_000_000,
      description: "unpaid checkouts (`POST /pay/<link id>/checkout`) a payment link may have made in the last hour; more are `429 checkout_limit_reached`",
    }),
    limitPerEmail: integer({
      env: 'CHECKOUT_LIMIT_PER_EMAIL',
      group: 'API',
      default: 3,
      minimum: 1,
      maximum: 1_000_000,
      description: "unpaid checkouts one email address may have in one account's links made in the last hour; more are `429 checkout_limit_reached`",
    }),
    expiry: duration({
      env: 'CHECKOUT_EXPIRY',
      group: 'Workers',
      default: 'PT24H',
      description: 'an unpaid checkout with no payment seen is voided this long after it was made (`checkouts.expire`)',
    }),
    expireEvery: duration({ env: 'CHECKOUT_EXPIRE_EVERY', group: 'Workers', default: 'PT5M', description: 'how often the worker voids expired checkouts' }),
  }),
  subscriptions: Type.Object({
    pollIntervalMs: integer({
      env: 'SUBSCRIPTION_POLL_INTERVAL_MS',
      group: 'Workers',
      default: 1000,
      minimum: 50,
      maximum: 3_600_000,
      description: 'how often the worker looks for subscriptions due a charge, a dunning retry, an end or an on-chain cancel (`subscriptions.charge`, `subscriptions.cancel`)',
    }),
    dunningSchedule: durations({
      env: 'DUNNING_SCHEDULE',
      group: 'Workers',
      default: DEFAULT_DUNNING_SCHEDULE,
      description: "when a period's failed charge is tried again: ISO-8601 durations after the period's due time, increasing (sandbox may use seconds, `PT10S,PT30S`); one attempt at the due time plus one per entry",
    }),
    dunningFinalAction: oneOf(DUNNING_FINAL_ACTIONS, {
      env: 'DUNNING_FINAL_ACTION',
      group: 'Workers',
      default: 'cancel',
      description: 'after the last failed attempt: `cancel` the subscription (also on-chain, through the relayer), or `keep` it `past_due` and bill the next period',
    }),
  }),
  metricsPort: integer({
    env: 'METRICS_PORT',
    group: 'API',
    default: 9464,
    minimum: 0,
    maximum: 65535,
    description: "the API's internal port for `/metrics` (and `/healthz`, `/readyz`). Unset: 9464 if free, else any free port (logged). Set and taken: exit 1 naming it",
  }),
  metricsPortFallback: derived('METRICS_PORT unset: when 9464 is taken another free port will do.'),

  smtpUrl: optionalUrl({
    env: 'SMTP_URL',
    group: 'Email',
    protocols: ['smtp:', 'smtps:'],
    description: 'live emails: `smtp://user:pass@host:port`; pooled connections. Unset: live emails are written as `.eml` files. Sandbox emails never go here',
  }),
  sandboxSmtpUrl: optionalUrl({
    env: 'SANDBOX_SMTP_URL',
    group: 'Email',
    protocols: ['smtp:', 'smtps:'],
    description: 'sandbox emails (objects of sandbox keys): a capture server such as Mailpit. Unset: sandbox emails are written as `.eml` files',
  }),
  smtpPoolSize: integer({ env: 'SMTP_POOL_SIZE', group: 'Email', default: 5, minimum: 1, maximum: 100, description: 'pooled SMTP connections per worker' }),
  outboxDir: text({
    env: 'MAIL_OUTBOX_DIR',
    group: 'Email',
    default: 'var/outbox',
    description: 'where `.eml` files go: live emails when `SMTP_URL` is unset, sandbox emails when `SANDBOX_SMTP_URL` is unset',
  }),
  mailFrom: text({ env: 'MAIL_FROM', group: 'Email', default: 'Invoices <invoices@example.com>', description: "From of every email (Reply-To is the merchant's address)" }),

  workerConcurrency: integer({ env: 'WORKER_CONCURRENCY', group: 'Workers', default: 8, minimum: 1, maximum: 1000, description: 'jobs processed at once per worker process and queue' }),
  workerPort: integer({
    env: 'WORKER_PORT',
    group: 'Workers',
    default: 3001,
    minimum: 0,
    maximum: 65535,
    description: "worker's own HTTP port (health, metrics). Unset: 3001 if free, otherwise any free port (logged in `worker started`). Set and taken: the worker exits 1 naming `WORKER_PORT`",
  }),
  workerPortFallback: derived('WORKER_PORT unset: when 3001 is taken another free port will do.'),
  workerLockDurationMs: integer({
    env: 'WORKER_LOCK_DURATION_MS',
    group: 'Workers',
    default: 30_000,
    minimum: 1_000,
    maximum: 3_600_000,
    description: 'BullMQ lock of an active job: how soon a job of a dead worker is retried',
  }),
  workerStalledIntervalMs: integer({
    env: 'WORKER_STALLED_INTERVAL_MS',
    group: 'Workers',
    default: 30_000,
    minimum: 1_000,
    maximum: 3_600_000,
    description: 'how often a worker looks for stalled jobs (with `WORKER_LOCK_DURATION_MS`, how soon a job of a dead worker is retried)',
  }),
  shutdownTimeoutMs: integer({
    env: 'SHUTDOWN_TIMEOUT_MS',
    group: 'Workers',
    default: 10_000,
    minimum: 0,
    maximum: 600_000,
    description: 'how long a SIGTERM/SIGINT waits for active jobs and requests; past it the process exits 0 and its unfinished jobs are retried once their locks expire',
  }),
  outboxRelayIntervalMs: integer({
    env: 'OUTBOX_RELAY_INTERVAL_MS',
    group: 'Workers',
    default: 1000,
    minimum: 50,
    maximum: 3_600_000,
    description: 'how often a worker hands over outbox rows the API could not enqueue',
  }),
  pdfRenderThreads: integer({
    env: 'PDF_RENDER_THREADS',
    group: 'Workers',
    minimum: 0,
    maximum: 64,
    defaultText: 'cores, at most 4',
    description: "threads rendering PDFs per process (worker: started with the process; the API's PDF download: on first use); `0` renders on the main thread",
  }),

  webhooks: WebhookConfigSchema,
  events: Type.Object({
    retentionDays: integer({ env: 'EVENTS_RETENTION_DAYS', group: 'Webhooks and events', default: 30, minimum: 30, maximum: 3650, description: 'events older than this are pruned (at least 30)' }),
    pruneEvery: duration({ env: 'EVENTS_PRUNE_EVERY', group: 'Webhooks and events', default: 'PT1H', description: 'how often the events pruner runs' }),
  }),

  reminders: Type.Object({
    beforeStart: duration({ env: 'REMINDERS_BEFORE_START', group: 'Reminders', default: 'P3D', description: 'first pre-due reminder, before the due date' }),
    beforeEvery: duration({ env: 'REMINDERS_BEFORE_EVERY', group: 'Reminders', default: 'P1D', description: 'step of the pre-due reminders, until due' }),
    afterStart: duration({ env: 'REMINDERS_AFTER_START', group: 'Reminders', default: 'P1D', description: 'first post-due reminder, after the due date' }),
    afterEvery: duration({ env: 'REMINDERS_AFTER_EVERY', group: 'Reminders', default: 'P7D', description: 'step of the post-due reminders' }),
    afterMax: integer({ env: 'REMINDERS_AFTER_MAX', group: 'Reminders', default: 4, minimum: 0, maximum: 1000, description: 'number of post-due reminders' }),
    localHour: integer({
      env: 'REMINDERS_LOCAL_HOUR',
      group: 'Reminders',
      default: 9,
      minimum: 0,
      maximum: 23,
      description: "with day-sized durations, reminders land at this hour in the customer's zone (else the account's)",
    }),
    defaultTimeZone: timeZone({
      env: 'REMINDERS_DEFAULT_TIME_ZONE',
      group: 'Reminders',
      default: 'UTC',
      description: "zone of merchant accounts provisioned without one; a customer's own zone wins",
    }),
  }),

  chainsFile: optionalText({ env: 'CHAINS_FILE', group: 'Chains', description: 'path of a JSON file describing the chains to watch' }),
  chainPollIntervalMs: integer({ env: 'CHAIN_POLL_INTERVAL_MS', group: 'Chains', default: 2000, minimum: 50, maximum: 3_600_000, description: 'how often each watched chain is polled for new blocks' }),
  chainGetLogsMaxBlocks: integer({
    env: 'CHAIN_GETLOGS_MAX_BLOCKS',
    group: 'Chains',
    default: 2000,
    minimum: 1,
    maximum: 1_000_000,
    description: 'largest block range asked of an RPC endpoint in one `eth_getLogs`',
  }),
  chainRpcQuorum: integer({
    env: 'CHAIN_RPC_QUORUM',
    group: 'Chains',
    default: 1,
    minimum: 1,
    maximum: 5,
    description:
      "how many of a chain's RPC URLs must agree, each asked alone, before a range is believed: the same logs, the same block headers, the head the lowest of theirs (1: the leading URL alone; a chain with fewer URLs answering its id is not scanned)",
  }),
  rpcUrls: Type.Unsafe<Record<number, string[]>>({
    type: 'object',
    env: 'RPC_URL_<chainId>',
    envPattern: /^RPC_URL_(.*)$/,
    kind: 'rpcUrls',
    group: 'Chains',
    protocols: ['http:', 'https:', 'ws:', 'wss:'],
    description: "comma-separated http(s) or ws(s) URLs that set or override the RPC URLs of the chain with that id (`RPC_URL_84532=https://...`)",
  }),

  relayerPrivateKeyFile: optionalText({
    env: 'RELAYER_PRIVATE_KEY_FILE',
    group: 'Relayer',
    defaultText: 'unset: no relayer (chain 31337: `relayer.key` beside `CHAINS_FILE`, which `npm run chain` writes)',
    description:
      "path of a file holding the relayer's private key (64 hexadecimal characters, `0x` optional), the operator of new subscriptions on every chain without its own `RELAYER_PRIVATE_KEY_<chainId>`; read once at start; refused when its group or others may read it (`chmod 600`). See [The relayer](subscriptions.md#the-relayer)",
  }),
  relayerPrivateKeys: Type.Unsafe<Record<number, Secret<`0x${string}`>>>({
    type: 'object',
    env: 'RELAYER_PRIVATE_KEY_<chainId>',
    // Not RELAYER_PRIVATE_KEY_FILE, a variable of its own.
    envPattern: /^RELAYER_PRIVATE_KEY_(?!FILE$)(.*)$/,
    kind: 'privateKeys',
    group: 'Relayer',
    description:
      "the relayer's private key itself (not a path) for the chain with that id; wins over `RELAYER_PRIVATE_KEY_FILE` for that chain. Never logged, never in an error",
  }),
  relayerStuckBlocks: integer({
    env: 'RELAYER_STUCK_BLOCKS',
    group: 'Relayer',
    default: 12,
    minimum: 1,
    maximum: 10_000,
    description: 'a relayer transaction not mined this many blocks after it was sent is replaced (same nonce) with fees at least 25% higher',
  }),
  relayerMinBalance: text({
    env: 'RELAYER_MIN_BALANCE',
    group: 'Relayer',
    default: '0.01',
    description: "native coin (ETH on Base and Ethereum, POL on Polygon) below which the relayer's balance is logged as a warning (the balance is always the `relayer_native_balance` metric)",
  }),

  // Not a variable: the built-in chains joined by CHAINS_FILE, with RPC_URL_<chainId> over both.
  chains: Type.Unsafe<Chain[]>({ type: 'array', description: 'Every chain in use; those with RPC URLs are watched.' }),

  adminUser: optionalText({ env: 'ADMIN_USER', group: 'Queue dashboard', description: 'user of the queue dashboard, set together with `ADMIN_PASSWORD`; unset: dashboard off' }),
  adminPassword: optionalText({ env: 'ADMIN_PASSWORD', group: 'Queue dashboard', description: 'password of the queue dashboard, set together with `ADMIN_USER`; unset: dashboard off' }),

  logLevel: oneOf(LOG_LEVELS, { env: 'LOG_LEVEL', group: 'Logs', default: 'info', description: 'pino level' }),
  logFormat: oneOf(LOG_FORMATS, { env: 'LOG_FORMAT', group: 'Logs', default: 'auto', description: 'readable lines (`pretty`), one JSON object a line (`json`), or `auto`: pretty when stdout is a terminal' }),
});

export type Config = Static<typeof ConfigSchema>;
export type WebhookConfig = Static<typeof WebhookConfigSchema>;

/** A variable of the schema with where its value goes in Config (`webhooks.timeoutMs`). */
export interface ConfigVariable extends VariableMeta {
  path: readonly string[];
  schema: TSchema;
}

function isVariable(schema: TSchema): schema is TSchema & VariableMeta {
  return typeof (schema as { env?: unknown }).env === 'string';
}

function propertiesOf(schema: TSchema): Record<string, TSchema> | null {
  const props = (schema as { properties?: unknown }).properties;
  return typeof props === 'object' && props !== null && !isVariable(schema) ? (props as Record<string, TSchema>) : null;
}

/** Every variable, in the schema's order. */
export function configVariables(schema: TSchema = ConfigSchema, path: readonly string[] = []): ConfigVariable[] {
  const props = propertiesOf(schema);
  if (props === null) return [];
  return Object.entries(props).flatMap(([key, child]) =>
    isVariable(child) ? [{ ...(child as VariableMeta), path: [...path, key], schema: child }] : configVariables(child, [...path, key]),
  );
}

/** True for a name the service reads: a variable of the schema, or one of a pattern's family. */
export function isConfigVariable(name: string): boolean {
  return configVariables().some((v) => (v.envPattern ? v.envPattern.test(name) : v.env === name));
}
