// `npm run bench:reminders [N ...]` (or BENCH_REMINDERS_N="10000,100000"): puts N open invoices on
// their reminder schedules with the service's own code and prints, per N:
//   - time to schedule all (createReminderService().schedulers.schedule, 200 calls in flight);
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
// Targets: < 2 KB per scheduled invoice, lateness p99 < 500 ms, cancel p99 < 100 ms.
//
// `--cluster` (`npm run bench:reminders -- --cluster [N ...]`, default N = 300000): each N runs
// twice in the same run, on single Redis (REDIS_URL) and on a throwaway local 3-master Redis
// Cluster the bench starts (redis-server on free loopback ports, stopped at the end), with the
// service's default REMINDER_SHARDS for each (1 and 12). Beside the figures above it prints the
// bytes held by each master under the bench's prefix and their spread ((max - min) / mean,
// target within 15%). The bare-scheduler comparison runs on single Redis only.
//
// Self-contained: own database (invoices_bench_<random>, dropped at the end), own Redis prefixes
// (keys deleted at the end), default reminder policy (P3D/P1D before, P1D/P7D x4 after, 09:00
// local), invoices due in 10-40 days across five time zones. Run by hand, never as a test.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { Duration } from 'luxon';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config.js';
import { newId, newInvoiceReference } from '../src/domain/ids.js';
import type { ReminderPolicy } from '../src/domain/reminder-schedule.js';
import { createLogger } from '../src/log.js';
import { jobHandlers } from '../jobs/index.js';
import { QUEUES } from '../src/queue/catalogue.js';
import { createRedisConnections, queuePrefix, redisOptions, type RedisClient, type RedisTarget } from '../src/queue/redis.js';
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
import { provisionMerchant } from '../src/runtime/provision.js';
import { createWorkerRuntime, type WorkerRuntime } from '../src/runtime/worker-runtime.js';
import { createBenchDatabase, deleteRedisPrefix, fmt, loadAvg, note, percentile, REDIS_URL, sleep, table, type BenchDatabase } from './support.js';

const IN_FLIGHT = 200;
const CANCEL_SAMPLE = 200;
const LATENESS_SCHEDULES = 1_000;
const ZONES = ['Europe/Paris', 'America/New_York', 'Asia/Kolkata', 'Australia/Sydney', 'UTC'];
const TARGET = { bytes: 2048, latenessP99: 500, cancelP99: 100, spread: 0.15 };

const args = process.argv.slice(2);
const clusterMode = args.includes('--cluster');
const counts = args.filter((a) => a !== '--cluster');
const sizes = (counts.length ? counts : (process.env.BENCH_REMINDERS_N ?? (clusterMode ? '300000' : '10000,100000')).split(','))
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
  /** Keys of the schedules (scheduler hashes and their pending jobs). */
  keys: number;
  keyBytes: number;
  /** `repeat` + `delayed` sorted sets of the reminder queues. */
  zsetBytes: number;
  /** Every key under the prefix (adds the events streams, meta, id counters, other queues...). */
  allBytes: number;
  /** allBytes per master (one entry on single Redis). */
  perNode: number[];
}

/**
 * MEMORY USAGE of every key under `<prefix>:` whose queue part matches `queue`, node by node
 * (SCAN per master; single-key commands only), split as above.
 */
async function measureMemory(nodes: Redis[], prefix: string, queue: RegExp): Promise<MemoryReading> {
  const reading: MemoryReading = { keys: 0, keyBytes: 0, zsetBytes: 0, allBytes: 0, perNode: [] };
  for (const node of nodes) {
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
        // `<prefix>:{<tag>}:<queue>:<rest>`
        const m = /^[^{]*\{[^}]*\}:([^:]+):(.*)$/.exec(k);
        if (!m || !queue.test(m[1])) continue;
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
  return reading;
}

const spreadOf = (perNode: number[]) => (perNode.length < 2 ? 0 : (Math.max(...perNode) - Math.min(...perNode)) / (perNode.reduce((a, b) => a + b, 0) / perNode.length));

const perInvoice = (m: MemoryReading, n: number) => (m.keyBytes + m.zsetBytes) / n;

/** INFO used_memory summed over the nodes. */
async function usedMemory(nodes: Redis[]): Promise<number> {
  let total = 0;
  for (const node of nodes) total += Number(/^used_memory:(\d+)/m.exec(await node.info('memory'))?.[1] ?? NaN);
  return total;
}

interface Invoice extends ReminderInvoice {
  customerId: string;
}

interface RunResult {
  n: number;
  /** `single` or `cluster`, and the reminder shard count used. */
  mode: string;
  shards: number;
  scheduleS: number;
  memory: MemoryReading;
  usedDelta: number;
  bare: { scheduleS: number; memory: MemoryReading; usedDelta: number; cancelAllS: number } | null;
  lateness: number[];
  latenessWorkerConcurrency: number;
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

/** Where an invoice's scheduler lives: the repeat key of its shard. */
type RepeatKeyOf = (invoiceId: string) => string;

/** Resolves when the invoice's scheduler is gone from its shard's `repeat` set; returns ms from `t0`. */
async function timeUntilGone(redis: RedisClient, repeatKeyOf: RepeatKeyOf, id: string, t0: number, timeoutMs = 5_000): Promise<number> {
  const key = repeatKeyOf(id);
  for (;;) {
    if ((await redis.zscore(key, reminderSchedulerId(id))) === null) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) return Infinity;
  }
}

/** Invoice schedulers over every shard (shard 0's repeat set also holds the reconciler's). */
async function remSchedulerCount(redis: RedisClient, repeatKeys: string[]): Promise<number> {
  let n = 0;
  for (const key of repeatKeys) n += (await redis.zcard(key)) - ((await redis.zscore(key, 'reminders-reconcile')) === null ? 0 : 1);
  return n;
}

/**
 * Lateness with LATENESS_SCHEDULES first slots in one second, spread over `shards` queues as the
 * service spreads invoices (own names, same hash tags), each consumed by a Worker with the real
 * reminderWorkerOptions and the process's concurrency shared out, as the worker runtime does.
 */
async function measureLateness(config: Config, connection: ConnectionOptions, prefix: string, policy: ReminderPolicy, shards: number): Promise<number[]> {
  const queues = Array.from({ length: shards }, (_, i) =>
    new Queue(`lateness-${i}`, { connection, prefix: queuePrefix(prefix, reminderShardTag(i)), settings: reminderSchedulerSettings }),
  );
  // One slot per invoice: 10 s before due, then nothing until a day after due.
  const latenessPolicy: ReminderPolicy = { ...policy, beforeStart: Duration.fromISO('PT10S'), beforeEvery: Duration.fromISO('PT1H') };
  const schedulers = queues.map((q) => createReminderSchedulers(q, latenessPolicy));
  const fired: number[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const workerConnections = createRedisConnections(config);
  const workerConnection = workerConnections.forWorker();
  const workers = queues.map(
    (q) =>
      new Worker(
        q.name,
        async (job: Job) => {
          fired.push(Date.now() - plannedInstantOf(job).getTime());
          if (fired.length === LATENESS_SCHEDULES) done();
        },
        {
          connection: workerConnection,
          prefix: q.opts.prefix,
          concurrency: Math.max(1, Math.ceil(config.workerConcurrency / shards)),
          lockDuration: config.workerLockDurationMs,
          stalledInterval: config.workerStalledIntervalMs,
          ...reminderWorkerOptions,
        },
      ),
  );
  for (const w of workers) w.on('error', (err) => note(`lateness worker error: ${err.message}`));
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // Every first slot inside one whole second, ~4 s from now (scheduling 1,000 takes well under that).
  const second = Math.ceil((Date.now() + 4_000) / 1000) * 1000;
  const invoices = Array.from({ length: LATENESS_SCHEDULES }, () => ({
    id: newId('inv'),
    dueAt: new Date(second + Math.floor(Math.random() * 1000) + 10_000),
    timeZone: ZONES[Math.floor(Math.random() * ZONES.length)],
  }));
  const now = new Date();
  await pooled(invoices, IN_FLIGHT, (inv) => schedulers[reminderShardOf(inv.id, shards)].schedule(inv, now));
  if (Date.now() >= second) note('warning: scheduling the lateness set ran into its firing second');
  await Promise.race([all, sleep(second + 30_000 - Date.now())]);
  await Promise.all(workers.map((w) => w.close()));
  for (const q of queues) {
    await q.obliterate({ force: true }).catch(() => undefined);
    await q.close();
  }
  await workerConnections.close();
  if (fired.length < LATENESS_SCHEDULES) note(`warning: only ${fired.length} of ${LATENESS_SCHEDULES} lateness reminders fired within 30 s`);
  return fired;
}

async function runBare(nodes: Redis[], invoices: Invoice[], policy: ReminderPolicy): Promise<NonNullable<RunResult['bare']>> {
  const prefix = `bench-rem-bare-${randomBytes(4).toString('hex')}`;
  const queue = new Queue(QUEUES.reminders, { connection: redisOptions(REDIS_URL), prefix: queuePrefix(prefix, QUEUES.reminders) });
  try {
    const before = await usedMemory(nodes);
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
    const usedDelta = (await usedMemory(nodes)) - before;
    const memory = await measureMemory(nodes, prefix, /^invoice-reminders$/);
    const t1 = performance.now();
    await pooled(invoices, IN_FLIGHT, (inv) => queue.removeJobScheduler(reminderSchedulerId(inv.id)));
    const cancelAllS = (performance.now() - t1) / 1000;
    if ((await queue.getJobSchedulersCount()) !== 0) note('warning: bare schedulers left after removing them all');
    return { scheduleS, memory, usedDelta, cancelAllS };
  } finally {
    await queue.close();
    await deleteRedisPrefix(prefix);
  }
}

interface Target {
  mode: 'single' | 'cluster';
  redis: RedisTarget;
  /** REDIS_CLUSTER_NODES for the service's config, on the cluster. */
  clusterNodes?: string;
}

async function runSize(db: BenchDatabase, n: number, accountId: string, customers: { id: string; zone: string }[], target: Target): Promise<RunResult> {
  const prefix = `bench-rem-${randomBytes(4).toString('hex')}`;
  const outbox = mkdtempSync(path.join(os.tmpdir(), 'bench-rem-'));
  const config = loadConfig({
    DATABASE_URL: db.url,
    REDIS_URL,
    ...(target.clusterNodes ? { REDIS_CLUSTER_NODES: target.clusterNodes } : {}),
    REDIS_PREFIX: prefix,
    LOG_LEVEL: 'silent',
    MAIL_OUTBOX_DIR: outbox,
    RECONCILE_EVERY: 'PT1H', // the reconciler must not run in the middle of the measurements
    WORKER_PORT: '0',
  });
  const shards = config.reminderShards;
  const policy = config.reminders;
  const connections = createRedisConnections(config);
  const redis = connections.client;
  const nodes = await connections.masters();
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
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
    const service = worker.reminders;
    const shardQueues = Array.from({ length: shards }, (_, i) => worker!.queues.reminders.shard(i));
    const repeatKeys = shardQueues.map((q) => q.keys.repeat);
    const repeatKeyOf: RepeatKeyOf = (id) => repeatKeys[reminderShardOf(id, shards)];
    const schedule = (inv: Invoice, at: Date) => service.schedulersOf(reminderShardOf(inv.id, shards)).schedule(inv, at);

    note(`${target.mode} N=${n}: inserting invoices`);
    // N invoices to schedule, plus one probe.
    const invoices = await insertInvoices(pool, accountId, customers, n + 1);

    // The LISTEN connection is up once a payment removes a schedule (also warms every path).
    const probe = invoices[invoices.length - 1];
    await schedule(probe, new Date());
    await pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [probe.id]);
    const probeT0 = performance.now();
    if ((await timeUntilGone(redis, repeatKeyOf, probe.id, probeT0, 15_000)) === Infinity) throw new Error('the worker never removed the probe schedule');
    const open = invoices.slice(0, -1);

    note(`${target.mode} N=${n}: scheduling ${open.length} invoices over ${shards} shard(s), ${IN_FLIGHT} in flight`);
    const usedBefore = await usedMemory(nodes);
    const t0 = performance.now();
    const now = new Date();
    await pooled(open, IN_FLIGHT, (inv) => schedule(inv, now));
    const scheduleS = (performance.now() - t0) / 1000;
    const usedDelta = (await usedMemory(nodes)) - usedBefore;
    const scheduled = await remSchedulerCount(redis, repeatKeys);
    if (scheduled !== open.length) throw new Error(`expected ${open.length} schedulers, found ${scheduled}`);
    const memory = await measureMemory(nodes, prefix, /^invoice-reminders-\d+$/);

    let bare: RunResult['bare'] = null;
    if (target.mode === 'single') {
      note(`${target.mode} N=${n}: bare job schedulers, same ids`);
      bare = await runBare(nodes, open, policy);
    }

    note(`${target.mode} N=${n}: lateness, ${LATENESS_SCHEDULES} schedules firing in one second`);
    const lateness = await measureLateness(config, connections.forQueue(), prefix, policy, shards);

    note(`${target.mode} N=${n}: cancel latency, ${CANCEL_SAMPLE} invoices paid by SQL one at a time`);
    const sample = open.slice(0, CANCEL_SAMPLE);
    const cancelSample: number[] = [];
    for (const inv of sample) {
      const c0 = performance.now();
      await pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
      cancelSample.push(await timeUntilGone(redis, repeatKeyOf, inv.id, c0));
    }

    note(`${target.mode} N=${n}: one UPDATE pays the other ${open.length - CANCEL_SAMPLE}`);
    const a0 = performance.now();
    await pool.query(`update invoices set status = 'paid', paid_at = now() where status = 'open' and id = any($1)`, [
      open.slice(CANCEL_SAMPLE).map((x) => x.id),
    ]);
    const cancelAllUpdateS = (performance.now() - a0) / 1000;
    const deadline = Date.now() + 300_000;
    while ((await remSchedulerCount(redis, repeatKeys)) > 0) {
      if (Date.now() > deadline) throw new Error('schedulers still present 300 s after paying everything');
      await sleep(50);
    }
    const cancelAllS = (performance.now() - a0) / 1000;
    let leftJobs = 0;
    for (const q of shardQueues) leftJobs += (await redis.zrange(q.keys.delayed, '0', '-1')).filter((id) => id.startsWith('repeat:rem-')).length;
    if (leftJobs !== 0) note(`warning: ${leftJobs} pending reminder jobs left after cancelling every schedule`);

    return {
      n,
      mode: target.mode,
      shards,
      scheduleS,
      memory,
      usedDelta,
      bare,
      lateness,
      latenessWorkerConcurrency: config.workerConcurrency,
      cancelSample,
      cancelAllS,
      cancelAllUpdateS,
    };
  } finally {
    await worker?.close().catch((err) => note(`worker close: ${err}`));
    await pool.end();
    await connections.close();
    await deleteRedisPrefix(prefix, target.redis);
    rmSync(outbox, { recursive: true, force: true });
  }
}

function report(results: RunResult[], redisVersion: string): string {
  const head = ['', ...results.map((r) => `${r.mode} N = ${r.n.toLocaleString('en-US')}`), 'target'];
  const ms = (v: number) => (Number.isFinite(v) ? fmt(v, 1) : 'timeout');
  const pass = (ok: boolean) => (ok ? 'ok' : 'MISSED');
  const bareCell = (r: RunResult, f: (b: NonNullable<RunResult['bare']>) => string) => (r.bare ? f(r.bare) : '-');
  const rows: (string | number)[][] = [
    ['reminder shards (queues), Redis masters', ...results.map((r) => `${r.shards}, ${r.memory.perNode.length}`), ''],
    ['schedule all: s (invoices/s), service.schedule, 200 in flight', ...results.map((r) => `${fmt(r.scheduleS, 2)} (${fmt(r.n / r.scheduleS, 0)}/s)`), ''],
    ['  bare upsertJobScheduler(every), same ids', ...results.map((r) => bareCell(r, (b) => `${fmt(b.scheduleS, 2)} (${fmt(r.n / b.scheduleS, 0)}/s)`)), ''],
    ['Redis B per scheduled invoice (MEMORY USAGE)', ...results.map((r) => `${fmt(perInvoice(r.memory, r.n), 0)} ${pass(perInvoice(r.memory, r.n) < TARGET.bytes)}`), `< ${TARGET.bytes}`],
    ['  of which own keys / share of repeat+delayed', ...results.map((r) => `${fmt(r.memory.keyBytes / r.n, 0)} / ${fmt(r.memory.zsetBytes / r.n, 0)}`), ''],
    ['  bare job scheduler, same measure', ...results.map((r) => bareCell(r, (b) => fmt(perInvoice(b.memory, r.n), 0))), '(1.4-1.5 KB)'],
    ['  project / bare', ...results.map((r) => bareCell(r, (b) => `${fmt(perInvoice(r.memory, r.n) / perInvoice(b.memory, r.n), 2)}x`)), ''],
    ['MB per master (every key under the prefix)', ...results.map((r) => r.memory.perNode.map((b) => fmt(b / 1e6, 1)).join(' / ')), ''],
    ['  spread between masters (max - min) / mean', ...results.map((r) => (r.memory.perNode.length < 2 ? '-' : `${fmt(spreadOf(r.memory.perNode) * 100, 1)}% ${pass(spreadOf(r.memory.perNode) <= TARGET.spread)}`)), `<= ${TARGET.spread * 100}%`],
    ['  INFO used_memory delta / N (all masters)', ...results.map((r) => fmt(r.usedDelta / r.n, 0)), 'shared server: noisy'],
    [`lateness ms p50 / p99 / max (${LATENESS_SCHEDULES.toLocaleString('en-US')} in one second)`, ...results.map((r) => `${fmt(percentile(r.lateness, 50), 0)} / ${fmt(percentile(r.lateness, 99), 0)} / ${fmt(Math.max(...r.lateness), 0)} ${pass(percentile(r.lateness, 99) < TARGET.latenessP99)}`), `p99 < ${TARGET.latenessP99}`],
    ['  min lateness ms (never early)', ...results.map((r) => fmt(Math.min(...r.lateness), 0)), '>= 0'],
    [`cancel ms p50 / p99 / max (SQL paid -> scheduler gone, ${CANCEL_SAMPLE} sampled)`, ...results.map((r) => `${ms(percentile(r.cancelSample, 50))} / ${ms(percentile(r.cancelSample, 99))} / ${ms(Math.max(...r.cancelSample))} ${pass(percentile(r.cancelSample, 99) < TARGET.cancelP99)}`), `p99 < ${TARGET.cancelP99}`],
    ['cancel all others: one SQL UPDATE -> NOTIFY -> worker, s', ...results.map((r) => `${fmt(r.cancelAllS, 2)} (UPDATE ${fmt(r.cancelAllUpdateS, 2)})`), ''],
    ['  bare removeJobScheduler, 200 in flight, s', ...results.map((r) => bareCell(r, (b) => fmt(b.cancelAllS, 2))), ''],
  ];
  const policy = 'P3D/P1D before, P1D/P7D x4 after, 09:00 local';
  return [
    '',
    `npm run bench:reminders -- ${clusterMode ? '--cluster ' : ''}${sizes.join(' ')}`,
    `redis ${redisVersion}, node ${process.version}, ${os.cpus().length} cpus, ${loadAvg()}; policy ${policy}; invoice ids inv_ + 24 chars;`,
    `lateness workers: reminderWorkerOptions, concurrency ${results[0]?.latenessWorkerConcurrency} per process shared by the shards; cancel: createWorkerRuntime's LISTEN path`,
    '',
    table(head, rows),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  note(`bench:reminders${clusterMode ? ' --cluster' : ''} for N = ${sizes.join(', ')}`);
  const db = await createBenchDatabase();
  const info = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  let cluster: LocalRedisCluster | null = null;
  try {
    const redisVersion = /^redis_version:(\S+)/m.exec(await info.info('server'))?.[1] ?? '?';
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    const accountId = newId('acct');
    await provisionMerchant(pool, { id: accountId, name: 'Bench Merchant', email: 'bench@example.com', timeZone: 'UTC' });
    const customers = Array.from({ length: 100 }, (_, i) => ({ id: newId('cus'), zone: ZONES[i % ZONES.length] }));
    await pool.query(
      `insert into customers (id, account_id, environment, email, time_zone)
       select t.id, $1, 'sandbox', t.email, t.zone from unnest($2::text[], $3::text[], $4::text[]) as t(id, email, zone)`,
      [accountId, customers.map((c) => c.id), customers.map((_, i) => `customer-${i}@example.com`), customers.map((c) => c.zone)],
    );
    await pool.end();
    const single: Target = { mode: 'single', redis: { redisUrl: REDIS_URL, redisClusterNodes: null } };
    const targets: Target[] = [single];
    if (clusterMode) {
      note('starting a local 3-master Redis Cluster');
      cluster = await startRedisCluster({ masters: 3 });
      targets.push({
        mode: 'cluster',
        redis: loadConfig({ REDIS_URL, REDIS_CLUSTER_NODES: cluster.nodes }),
        clusterNodes: cluster.nodes,
      });
    }
    const results: RunResult[] = [];
    for (const n of sizes) for (const target of targets) results.push(await runSize(db, n, accountId, customers, target));
    process.stdout.write(report(results, redisVersion));
  } finally {
    info.disconnect();
    await cluster?.stop();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench:reminders failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
