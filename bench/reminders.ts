// `npm run bench:reminders [N ...] [--backend postgres|redis|both] [--cluster]` (or
// BENCH_REMINDERS_N="10000,100000"; backend default both): puts N open invoices on their reminder
// schedules with the service's own code and prints, per N and per queue backend, side by side:
//   - time to schedule all (the worker's reminder service, schedulersOf(shard).schedule, 200 calls in flight);
//   - Redis memory per scheduled invoice: MEMORY USAGE (SAMPLES 0) of every key of the invoices'
//     schedules (scheduler hash + pending job hash) plus the queue's `repeat` and `delayed` sorted
//     sets, divided by N; beside it the same figure for a bare BullMQ job scheduler (plain
//     upsertJobScheduler with `every` and a minimal template, same ids, same count, own prefix);
//   - lateness of fired reminders: 1,000 more schedules whose first slot falls in one second,
//     fired by a BullMQ Worker built with the real reminderWorkerOptions and the configured worker
//     concurrency, recording Date.now() - plannedInstantOf(job) when each job starts (with the N
//     schedules still in Redis);
//   - cancel latency: for 200 sampled invoices, one at a time, the time from issuing
//     `UPDATE invoices SET status = 'paid', paid_at = now()` to the scheduler being gone from Redis,
//     removed by a running worker runtime (createWorkerRuntime) through its LISTEN on the
//     reminder-stop trigger; then the time for one UPDATE paying all the others to leave no
//     scheduler behind (same path), and for the bare schedulers the time to remove them all
//     directly (removeJobScheduler, 200 in flight).
// On the Postgres backend the storage figure is the growth of pg_total_relation_size over the
// tables of the `bullmq` schema (rows, indexes, TOAST) divided by N, beside Redis's MEMORY USAGE.
// Targets: < 2 KB per scheduled invoice (Redis), lateness p99 < 500 ms, cancel p99 < 100 ms (both).
//
// `--cluster` (`npm run bench:reminders -- --cluster [N ...]`, default N = 300000): each N runs on
// single Redis (REDIS_URL) and on a throwaway local 3-master Redis Cluster the bench starts
// (redis-server on free loopback ports, stopped at the end), both on the Redis backend with the
// service's default REMINDER_SHARDS for each (1 and 12). Beside the figures above it prints the
// bytes held by each master under the bench's prefix and their spread ((max - min) / mean,
// target within 15%). The bare-scheduler comparison is left out on the cluster.
//
// Self-contained: own database (invoices_bench_<random>, dropped at the end), own Redis prefixes
// (keys deleted at the end), default reminder policy (P3D/P1D before, P1D/P7D x4 after, 09:00
// local), invoices due in 10-40 days across five time zones. Run by hand, never as a test.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { Duration } from 'luxon';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config.js';
import { newId, newInvoiceReference } from '../src/domain/ids.js';
import type { ReminderPolicy } from '../src/domain/reminder-schedule.js';
import { createLogger } from '../src/log.js';
import { jobHandlers } from '../jobs/index.js';
import { QUEUES } from '../src/queue/catalogue.js';
import { createRedisConnections, type RedisTarget } from '../src/queue/redis.js';
import { reminderShardOf, reminderShardTag } from '../src/queue/reminder-shards.js';
import { startRedisCluster, type LocalRedisCluster } from '../test/helpers/redis-cluster.js';
import {
  createReminderSchedulers,
  plannedInstantOf,
  reminderSchedulerId,
  reminderSchedulerSettings,
  reminderWorkerOptions,
  type ReminderInvoice,
} from '../src/queue/reminder-schedulers.js';
import { queueBackendOf, type AppQueue, type QueueBackend } from '../src/queue/backend.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import { createWorkerRuntime, type WorkerRuntime } from '../src/runtime/worker-runtime.js';
import {
  backendEnv,
  backendsFromArgs,
  createBenchDatabase,
  createValidity,
  DEFAULT_PG,
  fmt,
  loadAvg,
  note,
  openBenchPool,
  percentile,
  REDIS_URL,
  sleep,
  startStatementProfile,
  table,
  type StatementProfile,
  type BenchBackend,
  type BenchDatabase,
} from './support.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';

const IN_FLIGHT = 200;
const CANCEL_SAMPLE = 200;
const LATENESS_SCHEDULES = 1_000;
// A figure over reminders that never fired, schedules never removed or jobs left behind is not a
// speed: it is printed INVALID and the run exits 1.
const validity = createValidity();
const figure = (kind: string, n: number, what: string) => `${kind} N=${n} ${what}`;
const ZONES = ['Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Australia/Sydney', 'UTC'];
const TARGET = { bytes: 2048, latenessP99: 500, cancelP99: 100, spread: 0.15 };

const argv = process.argv.slice(2);
const clusterMode = argv.includes('--cluster');
const args = backendsFromArgs(argv.filter((a) => a !== '--cluster'));
/** What one column of the report ran on: a queue backend, or the Redis backend on the local cluster. */
type RunKind = BenchBackend | 'cluster';
const kinds: RunKind[] = clusterMode ? ['redis', 'cluster'] : args.backends;
const sizes = (args.rest.length ? args.rest : (process.env.BENCH_REMINDERS_N ?? (clusterMode ? '300000' : '10000,100000')).split(','))
  .map((s) => Number(s.replace(/[_,]/g, '')))
  .filter((n) => Number.isInteger(n) && n > CANCEL_SAMPLE);
if (sizes.length === 0) throw new Error(`give invoice counts above ${CANCEL_SAMPLE}, e.g. npm run bench:reminders -- 10000 100000`);

/** Runs fn over items with at most `limit` calls in flight. */
async function pooled<T>(items: T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

interface MemoryReading {
  /** Keys of the schedules (scheduler hashes and their pending jobs); Redis only. */
  keys: number;
  keyBytes: number;
  /** `repeat` + `delayed` sorted sets of the queues; Redis only. */
  zsetBytes: number;
  /** Redis: every key under the queues (adds the events streams, meta, id counters...). Postgres: growth of the bullmq schema's tables. */
  allBytes: number;
  /** Redis: bytes of every key under the bench's prefix, per master (one entry on single Redis). */
  perNode: number[];
}

const perInvoice = (m: MemoryReading, n: number) => (m.keyBytes + m.zsetBytes || m.allBytes) / n;

const spreadOf = (perNode: number[]) => (perNode.length < 2 ? 0 : (Math.max(...perNode) - Math.min(...perNode)) / (perNode.reduce((a, b) => a + b, 0) / perNode.length));

/** What the bench reads of the queue's storage, on either backend (the service never needs these). */
interface Store {
  backend: BenchBackend;
  /** Whether the invoice's scheduler still exists. */
  present(queue: AppQueue, invoiceId: string): Promise<boolean>;
  /** Reminder schedulers (`rem-*`) of the queues. */
  remSchedulers(queues: AppQueue[]): Promise<number>;
  /** Pending reminder jobs of the queues. */
  remJobs(queues: AppQueue[]): Promise<number>;
  /** Storage taken now: a baseline for `measure`. */
  baseline(): Promise<number>;
  /** Storage of the queues' schedules, against a baseline taken before they were made. */
  measure(queues: AppQueue[], before: number): Promise<MemoryReading>;
  close(): Promise<void>;
}

/** Single Redis or a cluster: every read is single-key, or a SCAN node by node. */
function redisStore(prefix: string, target: RedisTarget): Store {
  const connections = createRedisConnections(target);
  const redis = connections.client;
  const sum = async (queues: AppQueue[], f: (q: AppQueue) => Promise<number>) => (await Promise.all(queues.map(f))).reduce((a, b) => a + b, 0);
  return {
    backend: 'redis',
    present: async (queue, id) => (await redis.zscore(queue.keys.repeat, reminderSchedulerId(id))) !== null,
    // A queue's repeat set also holds the reconciler's (and other) schedulers.
    remSchedulers: (queues) => sum(queues, async (q) => (await redis.zrange(q.keys.repeat, '0', '-1')).filter((id) => id.startsWith('rem-')).length),
    remJobs: (queues) => sum(queues, async (q) => (await redis.zrange(q.keys.delayed, '0', '-1')).filter((id) => id.startsWith('repeat:rem-')).length),
    // INFO used_memory summed over the masters.
    baseline: async () => {
      let total = 0;
      for (const node of await connections.masters()) total += Number(/^used_memory:(\d+)/m.exec(await node.info('memory'))?.[1] ?? NaN);
      return total;
    },
    async measure(queues, before) {
      // MEMORY USAGE of every key under `<prefix>:`, node by node (SCAN per master), split as in
      // MemoryReading for the keys of these queues (`<prefix>:{<tag>}:<queue>:<rest>`).
      const names = new Set(queues.map((q) => q.name));
      const reading: MemoryReading = { keys: 0, keyBytes: 0, zsetBytes: 0, allBytes: 0, perNode: [] };
      for (const node of await connections.masters()) {
        let nodeBytes = 0;
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 2000);
          cursor = next;
          if (keys.length === 0) continue;
          const pipe = node.pipeline();
          for (const k of keys) pipe.memory('USAGE', k, 'SAMPLES', 0);
          const sizesOf = (await pipe.exec()) ?? [];
          for (const [i, k] of keys.entries()) {
            const bytes = Number(sizesOf[i]?.[1] ?? 0);
            nodeBytes += bytes;
            const m = /^[^{]*\{[^}]*\}:([^:]+):(.*)$/.exec(k);
            if (!m || !names.has(m[1])) continue;
            reading.allBytes += bytes;
            if (m[2].startsWith('repeat:rem-')) {
              reading.keys++;
              reading.keyBytes += bytes;
            } else if (m[2] === 'repeat' || m[2] === 'delayed') {
              reading.zsetBytes += bytes;
            }
          }
        } while (cursor !== '0');
        reading.perNode.push(nodeBytes);
      }
      void before; // INFO used_memory is reported separately (noisy on a shared server)
      return reading;
    },
    async close() {
      await connections.close();
      await deleteRedisPrefix(target, prefix);
    },
  };
}

function postgresStore(databaseUrl: string): Store {
  const pool = openBenchPool(databaseUrl, 2);
  const count = async (sql: string, params: unknown[]) => (await pool.query<{ n: number }>(sql, params)).rows[0].n;
  const schemaBytes = async () =>
    Number(
      (
        await pool.query<{ b: string }>(
          `select coalesce(sum(pg_total_relation_size(c.oid)), 0)::text as b
             from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'bullmq' and c.relkind in ('r', 'p', 'm')`,
        )
      ).rows[0].b,
    );
  return {
    backend: 'postgres',
    present: async (queue, id) => (await count('select count(*)::int as n from bullmq.scheduler where queue = $1 and scheduler_id = $2', [queue.name, reminderSchedulerId(id)])) > 0,
    remSchedulers: (queues) => count(`select count(*)::int as n from bullmq.scheduler where queue = any($1) and scheduler_id like 'rem-%'`, [queues.map((q) => q.name)]),
    remJobs: (queues) => count(`select count(*)::int as n from bullmq.job where queue = any($1) and id like 'repeat:rem-%' and finished_at_ms is null`, [queues.map((q) => q.name)]),
    baseline: schemaBytes,
    async measure(_queue, before) {
      // Rows, indexes and TOAST of every table of the schema; the autovacuum-free growth since `before`.
      const grown = (await schemaBytes()) - before;
      return { keys: 0, keyBytes: 0, zsetBytes: 0, allBytes: grown, perNode: [] };
    },
    async close() {
      await pool.end();
    },
  };
}

interface Invoice extends ReminderInvoice {
  customerId: string;
}

interface RunResult {
  kind: RunKind;
  n: number;
  /** The reminder shard count used (REMINDER_SHARDS default of the run). */
  shards: number;
  scheduleS: number;
  memory: MemoryReading;
  usedDelta: number;
  /** Null on the cluster: the comparison runs on single Redis and Postgres. */
  bare: { scheduleS: number; memory: MemoryReading; usedDelta: number; cancelAllS: number } | null;
  lateness: number[];
  latenessProfile: StatementProfile;
  /** The same firing on plain BullMQ (null on the cluster). */
  latenessBare: LatenessPass | null;
  latenessWorkerConcurrency: number;
  cancelAllProfile: StatementProfile;
  cancelSample: number[];
  cancelAllS: number;
  cancelAllUpdateS: number;
}

async function insertInvoices(db: pg.Pool, accountId: string, customers: { id: string; zone: string }[], n: number): Promise<Invoice[]> {
  const now = Date.now();
  const invoices: Invoice[] = [];
  for (let i = 0; i < n; i++) {
    const c = customers[i % customers.length];
    // Due 10-40 days ahead at any minute: the first slot (due - 3 days at 09:00 local) is days away.
    const dueAt = new Date(now + 10 * 86_400_000 + Math.floor(Math.random() * 30 * 86_400_000 / 60_000) * 60_000);
    invoices.push({ id: newId('inv'), dueAt, timeZone: c.zone, customerId: c.id });
  }
  for (let i = 0; i < n; i += 10_000) {
    const batch = invoices.slice(i, i + 10_000);
    await db.query(
      `insert into invoices (id, account_id, environment, customer_id, reference, status, amount, amount_atomic, fee_atomic,
         currency, network, chain_id, token_address, token_decimals, due_at, sent_at)
       select t.id, $1, 'sandbox', t.customer_id, t.reference, 'open', 10, 10000000, 50000,
         'USDC', 'base-sepolia', 84532, '0x036CbD53842c5426634e7929541eC2318f3dCF7e', 6, t.due_at, now()
       from unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[]) as t(id, customer_id, reference, due_at)`,
      [accountId, batch.map((x) => x.id), batch.map((x) => x.customerId), batch.map(() => newInvoiceReference()), batch.map((x) => x.dueAt)],
    );
  }
  return invoices;
}

/** Resolves when the invoice's scheduler is gone; returns ms from `t0`. */
async function timeUntilGone(store: Store, queue: AppQueue, id: string, t0: number, timeoutMs = 5_000): Promise<number> {
  for (;;) {
    if (!(await store.present(queue, id))) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) return Infinity;
  }
}

/** One lateness pass: the lateness of each fired job, and where the pass's statements went. */
interface LatenessPass {
  lateness: number[];
  profile: StatementProfile;
}

/**
 * `leadMs`: how far ahead the firing second is, long enough to schedule all 1,000 before it. The
 * schedules are spread over `shards` queues as the service spreads invoices (own names, the
 * shards' hash tags), each consumed by a Worker with the real reminderWorkerOptions and the
 * process's concurrency shared out, as the worker runtime does.
 *
 * `bare`: the same 1,000 first slots on plain BullMQ, the bound of the queue backend alone: a
 * queue and a Worker with BullMQ's default repeat strategy (no reminderSchedulerSettings), each
 * slot a scheduler with `every` (one day) starting at it, the same concurrency, completed jobs
 * removed; lateness is read from the job id's instant as for ours.
 */
async function measureLateness(queues: QueueBackend, config: Config, policy: ReminderPolicy, leadMs: number, shards: number, db: { name: string; analyze(): Promise<void> }, bare = false): Promise<LatenessPass> {
  const names = Array.from({ length: shards }, (_, i) => `${QUEUES.reminders}-lateness${bare ? '-bare' : ''}-${i}`);
  const shardQueues = names.map((name, i) => queues.queue(name, bare ? {} : { settings: reminderSchedulerSettings }, reminderShardTag(i)));
  // One slot per invoice: 10 s before due, then nothing until a day after due.
  const latenessPolicy: ReminderPolicy = { ...policy, beforeStart: Duration.fromISO('PT10S'), beforeEvery: Duration.fromISO('PT1H') };
  const schedulers = shardQueues.map((q) => (bare ? null : createReminderSchedulers(q, latenessPolicy)));
  const fired: number[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const workers = names.map((name, i) =>
    queues.worker(
      name,
      async (job: Job) => {
        fired.push(Date.now() - (bare ? Number(/:(\d+)$/.exec(job.id ?? '')?.[1]) : plannedInstantOf(job).getTime()));
        if (fired.length === LATENESS_SCHEDULES) done();
      },
      {
        concurrency: Math.max(1, Math.ceil(config.workerConcurrency / shards)),
        lockDuration: config.workerLockDurationMs,
        stalledInterval: config.workerStalledIntervalMs,
        ...(bare ? { removeOnComplete: { count: 0 } } : reminderWorkerOptions),
      },
      reminderShardTag(i),
    ),
  );
  for (const w of workers) w.on('error', (err) => note(`lateness worker error: ${err.message}`));
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // Every first slot inside one whole second, far enough ahead that scheduling them all is over
  // before it: lateness is then the firing's alone.
  const second = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const invoices = Array.from({ length: LATENESS_SCHEDULES }, () => ({
    id: newId('inv'),
    dueAt: new Date(second + Math.floor(Math.random() * 1000) + 10_000),
    timeZone: ZONES[Math.floor(Math.random() * ZONES.length)],
  }));
  const now = new Date();
  await pooled(invoices, IN_FLIGHT, async (inv) => {
    const shard = reminderShardOf(inv.id, shards);
    const ours = schedulers[shard];
    if (ours) await ours.schedule(inv, now);
    else
      await shardQueues[shard].upsertJobScheduler(
        reminderSchedulerId(inv.id),
        { every: 86_400_000, startDate: new Date(inv.dueAt.getTime() - 10_000) },
        { name: 'invoice.reminder', data: { invoiceId: inv.id, phase: 'before' } },
      );
  });
  await db.analyze();
  if (Date.now() >= second) note('warning: scheduling the lateness set ran into its firing second');
  // The profile covers the firing: from just before the second to the last job.
  await sleep(Math.max(0, second - 200 - Date.now()));
  const profiling = startStatementProfile(db.name);
  await Promise.race([all, sleep(second + 30_000 - Date.now())]);
  const profile = profiling.stop();
  await Promise.all(workers.map((w) => w.close()));
  for (const q of shardQueues) {
    await q.obliterate({ force: true }).catch(() => undefined);
    await q.close();
  }
  if (fired.length < LATENESS_SCHEDULES) note(`warning: only ${fired.length} of ${LATENESS_SCHEDULES} lateness reminders fired within 30 s`);
  return { lateness: fired, profile };
}

async function runBare(queues: QueueBackend, store: Store, invoices: Invoice[], policy: ReminderPolicy, analyze: () => Promise<void>): Promise<NonNullable<RunResult['bare']>> {
  // Its own queue (and so its own keys or rows), same ids.
  const queue = queues.queue(`${QUEUES.reminders}-bare`);
  try {
    const before = await store.baseline();
    const t0 = performance.now();
    // Same ids, a daily `every` starting at the invoice's first slot (a delayed job, as ours), the
    // same template data; nothing else.
    const firstOffset = policy.beforeStart.toMillis();
    await pooled(invoices, IN_FLIGHT, (inv) =>
      queue.upsertJobScheduler(
        reminderSchedulerId(inv.id),
        { every: 86_400_000, startDate: new Date(inv.dueAt.getTime() - firstOffset) },
        { name: 'invoice.reminder', data: { invoiceId: inv.id, phase: 'before' } },
      ),
    );
    const scheduleS = (performance.now() - t0) / 1000;
    const memory = await store.measure([queue], before);
    const usedDelta = store.backend === 'redis' ? (await store.baseline()) - before : memory.allBytes;
    await analyze();
    const t1 = performance.now();
    await pooled(invoices, IN_FLIGHT, (inv) => queue.removeJobScheduler(reminderSchedulerId(inv.id)));
    const cancelAllS = (performance.now() - t1) / 1000;
    const left = await queue.getJobSchedulersCount();
    validity.expect(left === 0, `${store.backend} N=${invoices.length} bare cancel all`, `${left} bare schedulers left after removing them all`);
    return { scheduleS, memory, usedDelta, cancelAllS };
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  }
}

async function runSize(kind: RunKind, db: BenchDatabase, n: number, accountId: string, customers: { id: string; zone: string }[], cluster: LocalRedisCluster | null): Promise<RunResult> {
  const backend: BenchBackend = kind === 'cluster' ? 'redis' : kind;
  const prefix = `bench-rem-${randomBytes(4).toString('hex')}`;
  const outbox = mkdtempSync(path.join(os.tmpdir(), 'bench-rem-'));
  const config = loadConfig({
    DATABASE_URL: db.url,
    ...backendEnv(backend, prefix),
    ...(kind === 'cluster' ? { REDIS_CLUSTER_NODES: cluster!.nodes } : {}),
    LOG_LEVEL: 'silent',
    MAIL_OUTBOX_DIR: outbox,
    RECONCILE_EVERY: 'PT1H', // the reconciler must not run in the middle of the measurements
    WORKER_PORT: '0',
  });
  const shards = config.reminderShards;
  const policy = config.reminders;
  const store = config.redisUrl !== null ? redisStore(prefix, { redisUrl: config.redisUrl, redisClusterNodes: config.redisClusterNodes }) : postgresStore(db.url);
  const queues = queueBackendOf(config, 'consumer');
  const pool = openBenchPool(db.url, 4);
  // After each bulk change the planner's statistics are brought up to date, as autovacuum's
  // analyze does on a default server within a minute. Without them (autovacuum off, or before it
  // ran) BullMQ's statements on a table it has never analysed can pick the partial index of the
  // queue's delayed jobs for a lookup by id, and scan every delayed job of the queue each time.
  const analyze = async () => {
    await pool.query('analyze');
  };
  let worker: WorkerRuntime | null = null;
  try {
    // A running worker: its LISTEN on the stop trigger is what removes schedulers on payment.
    worker = await createWorkerRuntime(config, createLogger('silent'), jobHandlers);
    await Promise.all(worker.workers.map((w) => w.waitUntilReady()));
    // Its reconciler runs at start (and its fresh scheduler fires at once): let both finish on the
    // database as it is now, before any invoice of this size exists.
    const started = Date.now();
    while ((await worker.queues.reminders.shard(0).getCompletedCount()) < 1 && Date.now() - started < 15_000) await sleep(50);
    await sleep(500);
    // The worker's own reminder service, over its shard queues.
    const service = worker.reminders;
    const shardQueues = Array.from({ length: shards }, (_, i) => worker!.queues.reminders.shard(i));
    const queueOf = (id: string) => shardQueues[reminderShardOf(id, shards)];
    const schedule = (inv: Invoice, at: Date) => service.schedulersOf(reminderShardOf(inv.id, shards)).schedule(inv, at);

    note(`${kind} N=${n}: inserting invoices`);
    // N invoices to schedule, plus one probe.
    const invoices = await insertInvoices(pool, accountId, customers, n + 1);

    // The LISTEN connection is up once a payment removes a schedule (also warms every path).
    const probe = invoices[invoices.length - 1];
    await schedule(probe, new Date());
    await pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [probe.id]);
    const probeT0 = performance.now();
    if ((await timeUntilGone(store, queueOf(probe.id), probe.id, probeT0, 15_000)) === Infinity) throw new Error('the worker never removed the probe schedule');
    const open = invoices.slice(0, -1);

    note(`${kind} N=${n}: scheduling ${open.length} invoices over ${shards} shard(s), ${IN_FLIGHT} in flight`);
    const usedBefore = await store.baseline();
    const t0 = performance.now();
    const now = new Date();
    await pooled(open, IN_FLIGHT, (inv) => schedule(inv, now));
    const scheduleS = (performance.now() - t0) / 1000;
    const memory = await store.measure(shardQueues, usedBefore);
    const usedDelta = backend === 'redis' ? (await store.baseline()) - usedBefore : memory.allBytes;
    await analyze();
    const scheduled = await store.remSchedulers(shardQueues);
    if (scheduled !== open.length) throw new Error(`expected ${open.length} schedulers, found ${scheduled}`);

    let bare: RunResult['bare'] = null;
    if (kind !== 'cluster') {
      note(`${kind} N=${n}: bare job schedulers, same ids`);
      bare = await runBare(queues, store, open, policy, analyze);
    }

    note(`${kind} N=${n}: lateness, ${LATENESS_SCHEDULES} schedules firing in one second`);
    // 1.5x the time this backend took to schedule as many, and at least 4 s.
    const leadMs = Math.max(4_000, Math.ceil((LATENESS_SCHEDULES / (n / scheduleS)) * 1.5 * 1000));
    const { lateness, profile: latenessProfile } = await measureLateness(queues, config, policy, leadMs, shards, { name: db.name, analyze });
    validity.expect(lateness.length === LATENESS_SCHEDULES, figure(kind, n, 'lateness'), `only ${lateness.length} of ${LATENESS_SCHEDULES} reminders fired within 30 s`);
    let latenessBare: LatenessPass | null = null;
    if (kind !== 'cluster') {
      note(`${kind} N=${n}: lateness on bare BullMQ, ${LATENESS_SCHEDULES} schedules firing in one second`);
      latenessBare = await measureLateness(queues, config, policy, leadMs, shards, { name: db.name, analyze }, true);
      validity.expect(latenessBare.lateness.length === LATENESS_SCHEDULES, figure(kind, n, 'bare lateness'), `only ${latenessBare.lateness.length} of ${LATENESS_SCHEDULES} bare jobs fired within 30 s`);
    }

    note(`${kind} N=${n}: cancel latency, ${CANCEL_SAMPLE} invoices paid by SQL one at a time`);
    const sample = open.slice(0, CANCEL_SAMPLE);
    const cancelSample: number[] = [];
    for (const inv of sample) {
      const c0 = performance.now();
      await pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
      cancelSample.push(await timeUntilGone(store, queueOf(inv.id), inv.id, c0));
    }

    const timedOut = cancelSample.filter((x) => x === Infinity).length;
    validity.expect(timedOut === 0, figure(kind, n, 'cancel'), `${timedOut} of ${cancelSample.length} schedulers still present 5 s after their invoice was paid`);

    note(`${kind} N=${n}: one UPDATE pays the other ${open.length - CANCEL_SAMPLE}`);
    await analyze();
    const cancelProfiling = startStatementProfile(db.name);
    const a0 = performance.now();
    await pool.query(`update invoices set status = 'paid', paid_at = now() where status = 'open' and id = any($1)`, [
      open.slice(CANCEL_SAMPLE).map((x) => x.id),
    ]);
    const cancelAllUpdateS = (performance.now() - a0) / 1000;
    const deadline = Date.now() + 300_000;
    while ((await store.remSchedulers(shardQueues)) > 0) {
      if (Date.now() > deadline) throw new Error('schedulers still present 300 s after paying everything');
      await sleep(50);
    }
    const cancelAllS = (performance.now() - a0) / 1000;
    const cancelAllProfile = cancelProfiling.stop();
    const leftJobs = await store.remJobs(shardQueues);
    validity.expect(leftJobs === 0, figure(kind, n, 'cancel all'), `${leftJobs} pending reminder jobs left after cancelling every schedule`);

    return { kind, n, shards, scheduleS, memory, usedDelta, bare, lateness, latenessProfile, latenessBare, latenessWorkerConcurrency: config.workerConcurrency, cancelSample, cancelAllS, cancelAllUpdateS, cancelAllProfile };
  } finally {
    await worker?.close().catch((err) => note(`worker close: ${err}`));
    await queues.close();
    await pool.end();
    await store.close();
    rmSync(outbox, { recursive: true, force: true });
  }
}

function report(results: RunResult[], redisVersion: string): string {
  const head = ['', ...results.map((r) => `${r.kind} N = ${r.n.toLocaleString('en-US')}`), 'target'];
  const ms = (v: number) => (Number.isFinite(v) ? fmt(v, 1) : 'timeout');
  const pass = (ok: boolean) => (ok ? 'ok' : 'MISSED');
  const judged = (r: RunResult, what: string, ok: boolean) => validity.mark(figure(r.kind, r.n, what)).trim() || pass(ok);
  const isRedis = (r: RunResult) => r.kind !== 'postgres';
  const bareCell = (r: RunResult, f: (b: NonNullable<RunResult['bare']>) => string) => (r.bare ? f(r.bare) : '-');
  const rows: (string | number)[][] = [
    ['reminder shards (queues), Redis masters', ...results.map((r) => `${r.shards}, ${isRedis(r) ? r.memory.perNode.length : '-'}`), ''],
    ['schedule all: s (invoices/s), service.schedule, 200 in flight', ...results.map((r) => `${fmt(r.scheduleS, 2)} (${fmt(r.n / r.scheduleS, 0)}/s)`), ''],
    ['  bare upsertJobScheduler(every), same ids', ...results.map((r) => bareCell(r, (b) => `${fmt(b.scheduleS, 2)} (${fmt(r.n / b.scheduleS, 0)}/s)`)), ''],
    [
      'B per scheduled invoice (Redis MEMORY USAGE | Postgres table growth)',
      ...results.map((r) => `${fmt(perInvoice(r.memory, r.n), 0)}${isRedis(r) ? ` ${pass(perInvoice(r.memory, r.n) < TARGET.bytes)}` : ''}`),
      `Redis < ${TARGET.bytes}`,
    ],
    ['  Redis: own keys / share of repeat+delayed', ...results.map((r) => (isRedis(r) ? `${fmt(r.memory.keyBytes / r.n, 0)} / ${fmt(r.memory.zsetBytes / r.n, 0)}` : '-')), ''],
    ['  bare job scheduler, same measure', ...results.map((r) => bareCell(r, (b) => fmt(perInvoice(b.memory, r.n), 0))), ''],
    ['  project / bare', ...results.map((r) => bareCell(r, (b) => `${fmt(perInvoice(r.memory, r.n) / perInvoice(b.memory, r.n), 2)}x`)), ''],
    ['  Redis: all keys under the queues / N (project | bare)', ...results.map((r) => (isRedis(r) ? `${fmt(r.memory.allBytes / r.n, 0)} | ${bareCell(r, (b) => fmt(b.memory.allBytes / r.n, 0))}` : '-')), ''],
    ['  Redis: INFO used_memory delta / N, all masters (project | bare)', ...results.map((r) => (isRedis(r) ? `${fmt(r.usedDelta / r.n, 0)} | ${bareCell(r, (b) => fmt(b.usedDelta / r.n, 0))}` : '-')), 'shared server: noisy'],
    ['Redis: MB per master (every key under the prefix)', ...results.map((r) => (isRedis(r) ? r.memory.perNode.map((b) => fmt(b / 1e6, 1)).join(' / ') : '-')), ''],
    ['  spread between masters (max - min) / mean', ...results.map((r) => (r.memory.perNode.length < 2 ? '-' : `${fmt(spreadOf(r.memory.perNode) * 100, 1)}% ${pass(spreadOf(r.memory.perNode) <= TARGET.spread)}`)), `<= ${TARGET.spread * 100}%`],
    [`lateness ms p50 / p99 / max (${LATENESS_SCHEDULES.toLocaleString('en-US')} in one second)`, ...results.map((r) => `${fmt(percentile(r.lateness, 50), 0)} / ${fmt(percentile(r.lateness, 99), 0)} / ${fmt(Math.max(...r.lateness), 0)} ${judged(r, 'lateness', percentile(r.lateness, 99) < TARGET.latenessP99)}`), `p99 < ${TARGET.latenessP99}`],
    ['  min lateness ms (never early)', ...results.map((r) => fmt(Math.min(...r.lateness), 0)), '>= 0'],
    [
      '  bare BullMQ worker, same slots: p50 / p99 / max',
      ...results.map((r) => (r.latenessBare ? `${fmt(percentile(r.latenessBare.lateness, 50), 0)} / ${fmt(percentile(r.latenessBare.lateness, 99), 0)} / ${fmt(Math.max(...r.latenessBare.lateness), 0)}${validity.mark(figure(r.kind, r.n, 'bare lateness'))}` : '-')),
      '',
    ],
    [`cancel ms p50 / p99 / max (SQL paid -> scheduler gone, ${CANCEL_SAMPLE} sampled)`, ...results.map((r) => `${ms(percentile(r.cancelSample, 50))} / ${ms(percentile(r.cancelSample, 99))} / ${ms(Math.max(...r.cancelSample))} ${judged(r, 'cancel', percentile(r.cancelSample, 99) < TARGET.cancelP99)}`), `p99 < ${TARGET.cancelP99}`],
    ['cancel all others: one SQL UPDATE -> NOTIFY -> worker, s', ...results.map((r) => `${fmt(r.cancelAllS, 2)} (UPDATE ${fmt(r.cancelAllUpdateS, 2)})${validity.mark(figure(r.kind, r.n, 'cancel all'))}`), ''],
    ['  bare removeJobScheduler, 200 in flight, s', ...results.map((r) => bareCell(r, (b) => `${fmt(b.cancelAllS, 2)}${validity.mark(`${r.kind} N=${r.n} bare cancel all`)}`)), ''],
  ];
  const policy = 'P3D/P1D before, P1D/P7D x4 after, 09:00 local';
  return [
    '',
    `npm run bench:reminders -- ${[...new Set(results.map((r) => r.n))].join(' ')} ${clusterMode ? '--cluster' : `--backend ${[...new Set(results.map((r) => r.kind))].join(',')}`}`,
    `redis ${redisVersion}, node ${process.version}, ${os.cpus().length} cpus, ${loadAvg()}; policy ${policy}; invoice ids inv_ + 24 chars;`,
    `postgres autovacuum ${autovacuum}; the bench runs ANALYZE after each bulk change (scheduling, the lateness set, before the cancels), as autovacuum would`,
    `lateness workers: reminderWorkerOptions, concurrency ${results[0]?.latenessWorkerConcurrency} per process shared by the shards; cancel: createWorkerRuntime's LISTEN path`,
    '',
    table(head, rows),
    '',
    ...breakdown(results),
    ...validity.summary(),
    '',
  ].join('\n');
}

/** Where each pass's time went: statements per fired job (or per cancelled invoice), CPU. */
function breakdown(results: RunResult[]): string[] {
  const lines: string[] = ['Breakdown (statements this process sent, calls and ms in flight; CPU of this process and of the database backends):'];
  const one = (title: string, p: StatementProfile, per: number, unit: string) => {
    lines.push(
      `  ${title}: wall ${fmt(p.wallMs, 0)} ms, CPU bench process ${fmt(p.benchCpuMs, 0)} ms (${fmt(p.benchCpuMs / per, 2)} per ${unit}), Postgres backends ${fmt(p.pgCpuMs, 0)} ms (${fmt(p.pgCpuMs / per, 2)} per ${unit})`,
    );
    const total = p.statements.reduce((a, [, x]) => a + x.n, 0);
    lines.push(`    statements ${total} (${fmt(total / per, 2)} per ${unit}); by calls: calls  per ${unit}  ms in flight`);
    for (const [label, x] of p.statements.slice(0, 8)) lines.push(`    ${String(x.n).padStart(7)}  ${fmt(x.n / per, 2).padStart(6)}  ${fmt(x.ms, 0).padStart(8)}  ${label}`);
  };
  for (const r of results) {
    one(`${r.kind} N=${r.n} lateness (1,000 fired, ours)`, r.latenessProfile, LATENESS_SCHEDULES, 'job');
    if (r.latenessBare) one(`${r.kind} N=${r.n} lateness (1,000 fired, bare BullMQ)`, r.latenessBare.profile, LATENESS_SCHEDULES, 'job');
    one(`${r.kind} N=${r.n} cancel all (${r.n - CANCEL_SAMPLE} invoices)`, r.cancelAllProfile, r.n - CANCEL_SAMPLE, 'invoice');
  }
  return [...lines, ''];
}

let autovacuum = '?';

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: DEFAULT_PG });
  await admin.connect();
  autovacuum = (await admin.query<{ autovacuum: string }>('show autovacuum')).rows[0].autovacuum;
  await admin.end();
  note(`bench:reminders for N = ${sizes.join(', ')} on ${kinds.join(' and ')}; ${loadAvg()}`);
  let redisVersion = '-';
  if (kinds.includes('redis')) {
    const info = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    redisVersion = /^redis_version:(\S+)/m.exec(await info.info('server'))?.[1] ?? '?';
    info.disconnect();
  }
  let cluster: LocalRedisCluster | null = null;
  if (kinds.includes('cluster')) {
    note('starting a local 3-master Redis Cluster');
    cluster = await startRedisCluster({ masters: 3 });
  }
  const results: RunResult[] = [];
  try {
    for (const n of sizes) for (const kind of kinds) results.push(await runOne(kind, n, cluster));
  } finally {
    await cluster?.stop();
  }
  process.stdout.write(report(results, redisVersion));
}

async function runOne(kind: RunKind, n: number, cluster: LocalRedisCluster | null): Promise<RunResult> {
  // A database per run: the Postgres backend's storage figure is the growth of its schema.
  const db = await createBenchDatabase({ queueSchema: kind === 'postgres' });
  try {
    const pool = openBenchPool(db.url, 2);
    const accountId = newId('acct');
    await provisionMerchant(pool, { id: accountId, name: 'Bench Merchant', email: 'bench@example.com', timeZone: 'UTC' });
    const customers = Array.from({ length: 100 }, (_, i) => ({ id: newId('cus'), zone: ZONES[i % ZONES.length] }));
    await pool.query(
      `insert into customers (id, account_id, environment, email, time_zone)
       select t.id, $1, 'sandbox', t.email, t.zone from unnest($2::text[], $3::text[], $4::text[]) as t(id, email, zone)`,
      [accountId, customers.map((c) => c.id), customers.map((_, i) => `customer-${i}@example.com`), customers.map((c) => c.zone)],
    );
    await pool.end();
    return await runSize(kind, db, n, accountId, customers, cluster);
  } finally {
    await db.drop();
  }
}

main().then(
  () => process.exit(validity.any() ? 1 : 0),
  (err) => {
    process.stderr.write(`bench:reminders failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
