// `npm run bench:webhooks -- [N] [--backend postgres|redis]` (default 2000, postgres): N invoice events (written by the invoices trigger,
// as in production, which writes their deliveries) delivered to 1 and to 10 endpoints on a
// loopback receiver by one worker process on that queue backend (deliveries are no jobs; the
// backend only carries the upkeep), beside raw undici POSTs of the same bodies to the same receiver in the same run (the
// raw limit). Then events at half the measured maximum, one per transaction, for the
// event-created -> received latency. Targets: >= 0.5x the raw POST rate; p99 < 1 s at half max.
// Both sides are measured warm: the raw POSTs after as many untimed (the median of three runs of
// max(N, 10,000)), the worker after N untimed deliveries to one endpoint and N to ten. Beside the
// raw limit, the database's part alone (the worker's claim and recording statements over N
// deliveries, no HTTP) and the two in series, 1/(1/raw + 1/database): what one process doing
// both, one after the other, would make. Not a bound: the worker overlaps its requests with
// Postgres's work on the other core, and can pass it.
//
// Errors are not speed: a pass counts distinct (endpoint, webhook-id) arrivals, and is printed
// INVALID (and the run exits 1) when a delivery arrived twice, took more than one attempt or did
// not end `succeeded`, or a raw POST was not answered 2xx. The worker runs with
// WEBHOOK_ENDPOINT_CONCURRENCY = WEBHOOK_CONCURRENCY = the raw run's requests in flight.
// BENCH_CPU_PROF=<dir>: the worker runs with node --cpu-prof, its profile written there at exit.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool as UndiciPool } from 'undici';
import { newId } from '../src/domain/ids.js';
import { newWebhookSecret } from '../src/domain/webhooks.js';
import { claimDueDeliveriesWithEvents, recordDeliveryOutcomes } from '../src/db/webhook-deliveries.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import {
  backendEnv,
  backendsFromArgs,
  codeVersion,
  createBenchDatabase,
  createValidity,
  loadAvg,
  note,
  openBenchPool,
  randomSuffix,
  REDIS_URL,
  sleep,
  spawnTs,
  type Child,
} from './support.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';

const { backends, rest } = backendsFromArgs(process.argv.slice(2).some((a) => a.startsWith('--backend')) ? process.argv.slice(2) : [...process.argv.slice(2), '--backend', 'postgres']);
if (backends.length !== 1) throw new Error('--backend: postgres or redis');
const BACKEND = backends[0];
const N = Number(rest[0] ?? 2000);
const CONCURRENCY = Number(process.env.BENCH_WEBHOOK_CONCURRENCY ?? 50);
const ENDPOINTS = 10;

interface Arrival {
  path: string;
  id: string;
  at: number;
}

interface Receiver {
  server: Server;
  port: number;
  /** First arrival of each (path, webhook-id). */
  arrivals: Arrival[];
  /** Arrivals of a (path, webhook-id) already received: retries or redeliveries. */
  duplicates: number;
  reset(): void;
  /** Until `n` distinct (path, webhook-id) arrived. */
  waitFor(n: number, timeoutMs: number): Promise<void>;
}

function startReceiver(): Promise<Receiver> {
  const arrivals: Arrival[] = [];
  const seen = new Set<string>();
  let waiter: { n: number; resolve: () => void } | null = null;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const arrival = { path: req.url ?? '/', id: String(req.headers['webhook-id'] ?? ''), at: Date.now() };
      const key = `${arrival.path} ${arrival.id}`;
      if (seen.has(key)) receiver.duplicates++;
      else {
        seen.add(key);
        arrivals.push(arrival);
      }
      res.writeHead(200).end();
      if (waiter && arrivals.length >= waiter.n) {
        waiter.resolve();
        waiter = null;
      }
    });
  });
  server.keepAliveTimeout = 10_000;
  const receiver: Receiver = {
    server,
    port: 0,
    arrivals,
    duplicates: 0,
    reset() {
      arrivals.length = 0;
      seen.clear();
      receiver.duplicates = 0;
    },
    waitFor: (n, timeoutMs) =>
      new Promise<void>((ok, fail) => {
        if (arrivals.length >= n) return ok();
        const t = setTimeout(() => fail(new Error(`only ${arrivals.length} of ${n} deliveries after ${timeoutMs} ms`)), timeoutMs);
        waiter = { n, resolve: () => (clearTimeout(t), ok()) };
      }),
  };
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      receiver.port = (server.address() as AddressInfo).port;
      resolve(receiver);
    }),
  );
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

async function main(): Promise<void> {
  note(`bench:webhooks N=${N}, backend ${BACKEND}, ${loadAvg()}, ${codeVersion()}`);
  const validity = createValidity();
  const db = await createBenchDatabase({ queueSchema: BACKEND === 'postgres' });
  const prefix = `bench-webhooks-${randomSuffix()}`;
  const pool = openBenchPool(db.url, 5);
  const receiver = await startReceiver();
  let worker: Child | null = null;
  try {
    const { accountId } = await provisionMerchant(pool, { id: newId('acct'), name: 'Bench', email: null });
    const { rows: cust } = await pool.query<{ id: string }>(
      `insert into customers (id, account_id, environment, email) values ($1, $2, 'sandbox', 'bench@example.test') returning id`,
      [newId('cus'), accountId],
    );
    const endpointIds: string[] = [];
    for (let i = 0; i < ENDPOINTS; i++) {
      const id = newId('we');
      endpointIds.push(id);
      await pool.query(
        `insert into webhook_endpoints (id, account_id, environment, url, enabled_events, secret, status) values ($1, $2, 'sandbox', $3, '{*}', $4, 'disabled')`,
        [id, accountId, `http://127.0.0.1:${receiver.port}/e${i}`, newWebhookSecret()],
      );
    }
    const setEnabled = (n: number) =>
      pool.query(`update webhook_endpoints set status = case when id = any($1::text[]) then 'enabled' else 'disabled' end`, [endpointIds.slice(0, n)]);
    /** Inserts `count` invoices (their events and deliveries by the trigger); returns when it started and committed. */
    const insertInvoices = async (count: number): Promise<{ start: number; committed: number }> => {
      const t = Date.now();
      await pool.query(
        `insert into invoices (id, account_id, environment, customer_id, reference, status, amount, amount_atomic, fee_atomic, currency, network, chain_id, token_address, token_decimals, metadata)
         select 'inv_bench' || md5(random()::text), $1, 'sandbox', $2, md5(random()::text), 'draft', 25.5, 25500000, 127500, 'USDC', 'base-sepolia', 84532,
           '0x036CbD53842c5426634e7929541eC2318f3dCF7e', 6, '{"order": "A-1001"}'
         from generate_series(1, $3)`,
        [accountId, cust[0].id, count],
      );
      return { start: t, committed: Date.now() };
    };

    // ---- raw limit: undici POSTs of the same bodies, same concurrency, same receiver ----
    await setEnabled(0);
    await insertInvoices(Math.min(N, 200));
    const { rows: sample } = await pool.query<{ id: string }>(`select id from events limit 1`);
    const { rows: bodies } = await pool.query<{ body: string }>(
      `select jsonb_build_object('id', id, 'type', type, 'created_at', created_at, 'environment', environment, 'data', jsonb_build_object('object', snapshot))::text as body from events where id = $1`,
      [sample[0].id],
    );
    const body = bodies[0].body;
    const raw = new UndiciPool(`http://127.0.0.1:${receiver.port}`, { connections: CONCURRENCY });
    let rawNon2xx = 0;
    const rawRun = async (count: number) => {
      const start = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < count) {
            next++;
            const res = await raw.request({ method: 'POST', path: '/raw', body, headers: { 'content-type': 'application/json' } });
            if (res.statusCode < 200 || res.statusCode > 299) rawNon2xx++;
            await res.body.dump();
          }
        }),
      );
      return count / ((performance.now() - start) / 1000);
    };
    // Warm, as the worker is: with 500 POSTs of warm-up, three runs of 2,000 measured 6,199, 11,261
    // and 13,642 POSTs/s one after the other (the client's paths still being optimised); with
    // 10,000 they hold within 20%. The median of three runs.
    const rawPosts = Math.max(N, 10_000);
    await rawRun(rawPosts);
    const rawRates = [await rawRun(rawPosts), await rawRun(rawPosts), await rawRun(rawPosts)];
    const rawRate = [...rawRates].sort((a, b) => a - b)[1];
    await raw.close();
    validity.expect(rawNon2xx === 0, 'raw', `${rawNon2xx} raw POSTs not answered 2xx`);
    receiver.reset();
    note(`raw undici: ${rawRates.map((r) => r.toFixed(0)).join(' / ')} POSTs/s, median ${rawRate.toFixed(0)} (body ${body.length} B, ${CONCURRENCY} in flight)`);

    // ---- the database's part alone: the worker's own claim and recording statements over N
    // deliveries to one endpoint, no HTTP (two claim-then-record loops at once, as the worker has a
    // claim and a recording in flight), before the worker starts ----
    await setEnabled(1);
    let dbDone = 0;
    const dbLoop = async () => {
      for (;;) {
        const leaseId = randomUUID();
        const { claimed } = await claimDueDeliveriesWithEvents(pool, {
          leaseId,
          leaseMs: 60_000,
          limit: 2 * CONCURRENCY,
          perEndpoint: 2 * CONCURRENCY,
          busyEndpoints: [],
          busyRemaining: [],
          scan: 20 * CONCURRENCY,
        });
        if (claimed.length === 0) return;
        const startedAt = new Date();
        await recordDeliveryOutcomes(
          pool,
          claimed.map((d) => ({ id: d.id, leaseId, status: 'succeeded' as const, nextAttemptAt: null, attempt: { startedAt, statusCode: 200, durationMs: 1, error: null } })),
          [{ endpointId: claimed[0].endpoint_id, succeeded: true, firstFailureAt: null }],
        );
        dbDone += claimed.length;
      }
    };
    /** N deliveries claimed and recorded; their rate. */
    const dbPass = async () => {
      dbDone = 0;
      await insertInvoices(N);
      const start = performance.now();
      await Promise.all([dbLoop(), dbLoop()]);
      return dbDone / ((performance.now() - start) / 1000);
    };
    // Once untimed (warm, as the raw POSTs and the worker are), then timed.
    await dbPass();
    const dbRate = await dbPass();
    validity.expect(dbDone === N, 'database', `the database pass recorded ${dbDone} of ${N} deliveries`);
    const combined = 1 / (1 / rawRate + 1 / dbRate);
    note(`database alone: ${dbRate.toFixed(0)} deliveries/s claimed and recorded; the two in series ${combined.toFixed(0)}/s`);

    // ---- the worker ----
    worker = spawnTs('worker', 'main/worker.ts', [], {
      DATABASE_URL: db.url,
      ...backendEnv(BACKEND, prefix),
      WORKER_PORT: '0',
      LOG_LEVEL: 'warn',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_CONCURRENCY: String(CONCURRENCY),
      // As many in flight to one endpoint as the raw run has to its one origin.
      WEBHOOK_ENDPOINT_CONCURRENCY: String(CONCURRENCY),
    }, process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []);

    const eventTimes = async () => {
      const { rows } = await pool.query<{ id: string; t: string }>(`select id, (extract(epoch from created_at) * 1000)::float8::text as t from events`);
      return new Map(rows.map((r) => [r.id, Number(r.t)]));
    };

    // Every delivery so far must have succeeded at its first attempt and arrived once: otherwise
    // the pass measured retries and failures, not delivery.
    let badBefore = 0;
    const checkPass = async (label: string) => {
      const deadline = Date.now() + 120_000;
      while ((await pool.query<{ n: number }>(`select count(*)::int as n from webhook_deliveries where status = 'pending'`)).rows[0].n > 0) {
        if (Date.now() > deadline) break;
        await sleep(50);
      }
      const { rows } = await pool.query<{ bad: number; pending: number }>(
        `select count(*) filter (where status <> 'succeeded' or attempt_count <> 1)::int as bad, count(*) filter (where status = 'pending')::int as pending from webhook_deliveries`,
      );
      validity.expect(rows[0].bad === badBefore, label, `${rows[0].bad - badBefore} deliveries not succeeded at their first attempt (${rows[0].pending} still pending)`);
      validity.expect(receiver.duplicates === 0, label, `${receiver.duplicates} deliveries arrived more than once`);
      badBefore = rows[0].bad;
    };

    // Warm-up, untimed, as the raw POSTs have theirs: N deliveries to one endpoint, then N to ten
    // (N / 10 events). A worker in service runs warm; one just started runs its paths unoptimised
    // by the JIT for its first few thousand deliveries (measured: a first pass of 2,000 to one
    // endpoint ran at half the rate of the same pass run again after the others).
    for (const [endpoints, invoices] of [[1, N], [ENDPOINTS, Math.ceil(N / ENDPOINTS)]]) {
      receiver.reset();
      await setEnabled(endpoints);
      await insertInvoices(invoices);
      await receiver.waitFor(invoices * endpoints, 600_000);
      await checkPass('warm-up');
    }

    const results: { pass: string; deliveries: number; rate: number; p50: number; p99: number; insertS?: number; fromCommit?: number }[] = [];
    for (const endpoints of [1, ENDPOINTS]) {
      receiver.reset();
      await setEnabled(endpoints);
      const { start, committed } = await insertInvoices(N);
      await receiver.waitFor(N * endpoints, 600_000);
      const last = Math.max(...receiver.arrivals.map((a) => a.at));
      const elapsed = (last - start) / 1000;
      const times = await eventTimes();
      const lat = receiver.arrivals.map((a) => a.at - (times.get(a.id) ?? a.at));
      const pass = `max, ${endpoints} endpoint${endpoints > 1 ? 's' : ''}`;
      await checkPass(pass);
      results.push({
        pass,
        deliveries: N * endpoints,
        rate: (N * endpoints) / elapsed,
        p50: pct(lat, 50),
        p99: pct(lat, 99),
        insertS: (committed - start) / 1000,
        fromCommit: (N * endpoints) / ((last - committed) / 1000),
      });
      const first = Math.min(...receiver.arrivals.map((a) => a.at));
      note(`${endpoints} endpoint(s): ${(N * endpoints / elapsed).toFixed(0)} deliveries/s; insert ${committed - start} ms, first arrival ${first - committed} ms after the commit, last ${last - committed} ms`);
    }

    // ---- half the measured maximum, one event per transaction ----
    const half = results[0].rate / 2;
    receiver.reset();
    await setEnabled(1);
    const count = Math.max(50, Math.min(N, Math.round(half * 10)));
    const t0 = Date.now();
    for (let i = 0; i < count; i++) {
      const due = t0 + (i * 1000) / half;
      if (due > Date.now()) await sleep(due - Date.now());
      await insertInvoices(1);
    }
    await receiver.waitFor(count, 120_000);
    const times = await eventTimes();
    const lat = receiver.arrivals.map((a) => a.at - (times.get(a.id) ?? a.at));
    const halfPass = `half, 1 endpoint @${half.toFixed(0)}/s`;
    await checkPass(halfPass);
    results.push({ pass: halfPass, deliveries: count, rate: half, p50: pct(lat, 50), p99: pct(lat, 99) });

    /** The most a max pass could make were HTTP free: its insert, then its deliveries at the database part's rate. */
    const databaseBound = (r: { deliveries: number; insertS?: number }) => r.deliveries / ((r.insertS ?? 0) + r.deliveries / dbRate);
    const lines = [
      `bench:webhooks N=${N}, backend ${BACKEND}, one worker process: WEBHOOK_CONCURRENCY = WEBHOOK_ENDPOINT_CONCURRENCY = ${CONCURRENCY}`,
      `Raw limit (same run): undici POST -> loopback receiver, ${CONCURRENCY} in flight   ${rawRate.toFixed(0)} POSTs/s${validity.mark('raw')}`,
      `The database's part alone (same run): the worker's claim and recording statements, no HTTP   ${dbRate.toFixed(0)} deliveries/s${validity.mark('database')}`,
      `Raw and database in series, 1/(1/raw + 1/database) = ${combined.toFixed(0)}/s (not a bound: the worker overlaps them): the max passes are ${results
        .filter((r) => r.pass.startsWith('max'))
        .map((r) => `${(r.rate / combined).toFixed(2)}x (${(r.fromCommit! / combined).toFixed(2)}x from commit)`)
        .join(' and ')} of it`,
      '',
      `${'pass'.padEnd(36)}${'deliveries'.padStart(11)}${'per s'.padStart(9)}${'x raw'.padStart(8)}${'lat p50 ms'.padStart(12)}${'lat p99 ms'.padStart(12)}${'insert s'.padStart(10)}${'per s from commit'.padStart(19)}${'x raw'.padStart(7)}`,
      ...results.map(
        (r) =>
          `${`${r.pass}${validity.mark(r.pass)}`.padEnd(36)}${String(r.deliveries).padStart(11)}${r.rate.toFixed(0).padStart(9)}${(r.rate / rawRate).toFixed(2).padStart(8)}${r.p50.toFixed(0).padStart(12)}${r.p99.toFixed(0).padStart(12)}` +
          (r.insertS === undefined ? '' : `${r.insertS.toFixed(2).padStart(10)}${r.fromCommit!.toFixed(0).padStart(19)}${(r.fromCommit! / rawRate).toFixed(2).padStart(7)}`),
      ),
      '(a max pass runs from before the insert to the last arrival; "insert s" is the insert of the N invoices, whose trigger writes',
      ' their events and deliveries, until its commit; "from commit" counts from the commit, when the first delivery can go)',
      '',
      'The database alone, per max pass: its insert, then its deliveries at the database part\'s rate, with no HTTP at all',
      ...results
        .filter((r) => r.insertS !== undefined)
        .map((r) => `  ${r.pass}: at most ${databaseBound(r).toFixed(0)}/s = ${(databaseBound(r) / rawRate).toFixed(2)}x raw (the pass: ${(r.rate / databaseBound(r)).toFixed(2)}x of it)`),
      '',
      `targets: >= 0.5x raw (max passes); p99 < 1000 ms at half the maximum. ${loadAvg()}, ${codeVersion()}`,
      ...results.map((r) => {
        const judged = !validity.mark(r.pass) && !validity.mark('raw');
        const ok = r.pass.startsWith('max') ? r.rate / rawRate >= 0.5 : r.p99 < 1000;
        // A target above what the database alone allows is out of the worker's reach: say so.
        const beyond = r.insertS !== undefined && databaseBound(r) / rawRate < 0.5 ? ` (beyond the database alone: ${(databaseBound(r) / rawRate).toFixed(2)}x raw)` : '';
        return `  ${r.pass}: ${!judged ? 'INVALID' : ok ? 'met' : `MISSED${beyond}`}`;
      }),
      '',
      ...validity.summary(),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    validity.exitCode();
  } finally {
    await worker?.stop();
    receiver.server.closeAllConnections();
    receiver.server.close();
    await pool.end();
    await deleteRedisPrefix(REDIS_URL, prefix);
    await db.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
