// `npm run bench:api`: drives GET /v1/invoices/{id} and PATCH /v1/invoices/{id} with 50
// connections (autocannon) for 10 s each against the API process as production runs it
// (main/api.ts in a child process, no worker beside it on its event loop), and, in the same run, a
// bare Fastify route (another child process, logger off) returning the same bytes as the GET. It
// prints req/s and p50/p99 for each and the ratio to the bare route, plus a pooled pg
// primary-key select rate for context. The HTTP work and the database share the same cores, so
// it also prints the combined bound 1/(1/bare + 1/SQL) from the same run (bare route req/s and
// the GET's own statement, findInvoiceWithCredential, per second alone) beside the GET, and the
// target: GET >= 0.85x that bound with p99 < 20 ms.
//
// Errors are not speed: each request kind must answer 2xx before it is measured, and a run that
// saw any non-2xx response or socket error is printed INVALID with its status codes and a sample
// answer (its targets are not judged) and the process exits 1. The benchmarked API runs with its
// per-key and per-address limits lifted (LIMITS_LIFTED, printed with the results).
//
// Small run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379
//   BENCH_DURATION=3 npm run bench:api
//
// Self-contained: own database (invoices_bench_<random>, dropped at the end), own Redis prefix
// (keys deleted at the end). Run by hand, never as a test.
//
// Knobs (env): BENCH_DURATION (seconds per run, default 10), BENCH_CONNECTIONS (default 50),
// BENCH_CPU_PROF=1 (profile the service with node --cpu-prof over warm-up + the GET run only, skip
// the PATCH runs, and print where the service's CPU went per GET).
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import type { FastifyRequest } from 'fastify';
import { findInvoice, findInvoiceWithCredential } from '../src/db/invoices.js';
import { hashApiKey } from '../src/domain/api-keys.js';
import { authenticate } from '../src/http/auth.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import {
  openBenchPool,
  REDIS_URL,
  busyPercent,
  codeVersion,
  createValidity,
  cpuDelta,
  cpuMsOf,
  cpuSnapshot,
  createBenchDatabase,
  fmt,
  loadAvg,
  machineCpu,
  note,
  randomSuffix,
  spawnTs,
  statusCounts,
  summarizeProfiles,
  table,
  waitForHttp,
  type Child,
} from './support.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';
import { freePort } from '../src/lib/free-port.js';

const SELF = 'bench/api.ts';

/** The benchmarked API's limits, each at its maximum (printed with the results). */
const LIMITS_LIFTED = { RATE_LIMIT_MAX: '1000000000', AUTH_FAILURE_LIMIT: '1000000' };

// =============================================================================================
// Child mode: the bare route.

async function bare(port: number, bodyFile: string, contentType: string): Promise<void> {
  const bytes = readFileSync(bodyFile);
  const app = Fastify({ logger: false });
  app.get('/v1/invoices/:invoiceId', (_req, reply) => {
    reply.header('content-type', contentType).send(bytes);
  });
  await app.listen({ port, host: '127.0.0.1' });
  const stop = () => void app.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// =============================================================================================

interface Run {
  label: string;
  load: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
  /** "200: 13188, 429: 12". */
  codes: string;
  serverCpu: number;
  benchCpu: number;
  postgresCpu: number;
  machineBusy: number;
}

async function cannon(
  label: string,
  opts: autocannon.Options,
  pids: { server: number; pgBackends: RegExp },
): Promise<Run> {
  const load = loadAvg();
  note(`${label}: ${opts.connections} connections, ${opts.duration} s; ${load}`);
  const cpu0 = { server: cpuMsOf(pids.server), bench: process.cpuUsage(), pg: cpuSnapshot(pids.pgBackends), machine: machineCpu() };
  const t0 = performance.now();
  const r = await autocannon(opts);
  const wallMs = performance.now() - t0;
  const cpu1 = { server: cpuMsOf(pids.server), bench: process.cpuUsage(cpu0.bench), pg: cpuSnapshot(pids.pgBackends), machine: machineCpu() };
  return {
    label,
    load,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    total: r.requests.total,
    codes: statusCounts(r.statusCodeStats),
    serverCpu: ((cpu1.server - cpu0.server) / wallMs) * 100,
    benchCpu: ((cpu1.bench.user + cpu1.bench.system) / 1000 / wallMs) * 100,
    postgresCpu: (cpuDelta(cpu0.pg, cpu1.pg) / wallMs) * 100,
    machineBusy: busyPercent(cpu0.machine, cpu1.machine),
  };
}

/** `concurrency` loops calling fn for `seconds`; returns calls per second. */
async function rate(seconds: number, concurrency: number, fn: () => Promise<unknown>): Promise<number> {
  let count = 0;
  const deadline = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await fn();
        count++;
      }
    }),
  );
  return count / ((performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const duration = Number(process.env.BENCH_DURATION ?? 10);
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
  const startLoad = loadAvg();
  const codeAtStart = codeVersion();
  const validity = createValidity();
  note(`bench:api ${connections} connections x ${duration} s, ${os.cpus().length} cpus, node ${process.version}; ${startLoad}`);

  const db = await createBenchDatabase();
  const prefix = `bench_api_${randomSuffix()}`;
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-api-'));
  // The same pool size as the API's (createPool's default of 20).
  const pool = openBenchPool(db.url, 20);
  const children: Child[] = [];
  const cleanup = async () => {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await db.drop().catch((err) => note(`could not drop ${db.name}: ${err}`));
    const keys = await deleteRedisPrefix(REDIS_URL, prefix).catch(() => -1);
    rmSync(tmp, { recursive: true, force: true });
    note(`cleaned up: database ${db.name} dropped, ${keys} Redis keys under ${prefix}: deleted`);
  };
  process.once('SIGINT', () => {
    note('interrupted; cleaning up');
    void cleanup().finally(() => process.exit(130));
  });

  try {
    const { accountId, keys } = await provisionMerchant(pool, { id: 'acct_bench', name: 'Bench Merchant GmbH', email: 'billing@bench-merchant.example', timeZone: 'Europe/Berlin' });
    const key = keys.sandbox;
    const port = await freePort();
    const profileDir = process.env.BENCH_CPU_PROF ? path.join(tmp, 'profile') : null;
    const service = spawnTs('service (main/api.ts)', 'main/api.ts', [], {
      DATABASE_URL: db.url,
      REDIS_URL,
      REDIS_PREFIX: prefix,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      // The service's own limits lifted (each to its maximum), so the runs measure the routes, not
      // the 429 path: the per-key limit (RATE_LIMIT_MAX per window) and the per-address auth
      // failure limit, which also caps the key checks in flight per address and counts a request
      // aborted before its key was decided (autocannon's in-flight ones at the end of each run)
      // as a failure. All requests come from one address with one key.
      ...LIMITS_LIFTED,
      METRICS_PORT: '0',
      MAIL_OUTBOX_DIR: path.join(tmp, 'outbox'),
    }, profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []);
    children.push(service);
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/v1/invoices/x`);

    const headers = { 'api-key': key, 'content-type': 'application/json' };
    const createDraft = async (i: number): Promise<string> => {
      const res = await fetch(`${base}/v1/invoices`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          customer_email: `customer-${i}@bench.example`,
          customer_name: `Customer ${i}`,
          due_at: new Date(Date.now() + 30 * 86_400_000).toISOString(),
          memo: 'Thank you for your business.',
          metadata: { order: `ord_${1000 + i}` },
          line_items: [
            { description: 'Backend integration', quantity: 12, unit_amount: '125.00' },
            { description: 'Checkout UI design', quantity: 4, unit_amount: '98.50' },
            { description: 'Support (monthly)', quantity: 1, unit_amount: '300.00' },
          ],
        }),
      });
      if (res.status !== 200) throw new Error(`create draft: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { data: { id: string } }).data.id;
    };
    const invoiceId = await createDraft(0);
    const spread: string[] = [];
    for (let i = 1; i <= connections; i++) spread.push(await createDraft(i));

    const got = await fetch(`${base}/v1/invoices/${invoiceId}`, { headers: { 'api-key': key } });
    const bodyBytes = Buffer.from(await got.arrayBuffer());
    const contentType = got.headers.get('content-type') ?? 'application/json; charset=utf-8';
    const bodyFile = path.join(tmp, 'get-body.json');
    writeFileSync(bodyFile, bodyBytes);

    const barePort = await freePort();
    const bareChild = spawnTs('bare fastify', SELF, ['--bare', String(barePort), bodyFile, contentType], {});
    children.push(bareChild);
    const bareBase = `http://127.0.0.1:${barePort}`;
    await waitForHttp(`${bareBase}/v1/invoices/x`);
    const check = await fetch(`${bareBase}/v1/invoices/${invoiceId}`);
    if (!Buffer.from(await check.arrayBuffer()).equals(bodyBytes)) throw new Error('bare route does not return the same bytes');

    const pgBackends = new RegExp(`^postgres: .* ${db.name} `);
    const svc = { server: service.pid, pgBackends };
    const bareIds = { server: bareChild.pid, pgBackends };
    const getOpts = (url: string): autocannon.Options => ({ url: `${url}/v1/invoices/${invoiceId}`, connections, duration, headers: { 'api-key': key } });
    const patchBody = JSON.stringify({ memo: 'bench' });
    const patchOne: autocannon.Options = { url: `${base}/v1/invoices/${invoiceId}`, connections, duration, method: 'PATCH', headers, body: patchBody };
    let next = 0;
    const patchSpread: autocannon.Options = {
      url: base,
      connections,
      duration,
      requests: [
        {
          method: 'PATCH',
          headers,
          body: patchBody,
          setupRequest: (req) => ({ ...req, path: `/v1/invoices/${spread[next++ % spread.length]}` }),
        },
      ],
    };

    // Every kind of request must succeed once before it is measured: a run of errors is not a speed.
    const answer = async (method: string, url: string, body?: string) => {
      const res = await fetch(url, { method, headers: method === 'GET' ? { 'api-key': key } : headers, body });
      return { status: res.status, text: (await res.text()).slice(0, 300) };
    };
    for (const [method, url, body] of [
      ['GET', `${base}/v1/invoices/${invoiceId}`],
      ['PATCH', `${base}/v1/invoices/${invoiceId}`, JSON.stringify({ memo: 'bench' })],
      ['GET', `${bareBase}/v1/invoices/${invoiceId}`],
    ] as const) {
      const got = await answer(method, url, body);
      if (got.status < 200 || got.status > 299) throw new Error(`${method} ${url} answers ${got.status} before the run: ${got.text}`);
    }

    // Warm-up (JIT, pools), not reported.
    note('warm-up, 2 s each');
    const warmGets = (await autocannon({ ...getOpts(base), duration: 2 })).requests.total;
    if (!profileDir) await autocannon({ ...patchOne, duration: 2 });
    await autocannon({ ...getOpts(bareBase), duration: 2 });

    const runs: Run[] = [];
    runs.push(await cannon('GET /v1/invoices/{id} (service)', getOpts(base), svc));
    let profileLines: string[] = [];
    if (profileDir) {
      await service.stop();
      const files = readdirSync(profileDir).map((f) => path.join(profileDir, f));
      const gets = warmGets + runs[0].total;
      const s = summarizeProfiles(files, gets, ['authenticate', 'findInvoice', 'presentInvoice', 'hashApiKey', 'containsNul']);
      profileLines = [
        '',
        `CPU profile of the service (start-up + ${gets} GETs, no PATCH): ${fmt(s.totalMs, 0)} ms sampled (non-idle) = ${fmt((s.totalMs / gets) * 1000, 0)} us per GET; inclusive (sync part only) us/GET: ${Object.entries(
          s.inclusive,
        )
          .map(([f, ms]) => `${f} ${fmt((ms / gets) * 1000, 1)}`)
          .join(', ')}`,
        table(['self time by package/module', 'ms', '%', 'ms/GET'], s.rows),
      ];
    } else {
      runs.push(await cannon('PATCH /v1/invoices/{id} (service, one draft)', patchOne, svc));
      runs.push(await cannon(`PATCH /v1/invoices/{id} (service, ${spread.length} drafts)`, patchSpread, svc));
    }
    runs.push(await cannon('GET bare Fastify, same bytes', getOpts(bareBase), bareIds));

    // Context: what Postgres answers through a pooled client (pool of 20, 50 callers, this process).
    const pgLoad = loadAvg();
    note(`pg rates, 5 s each; ${pgLoad}`);
    const scope = { accountId, environment: 'sandbox' as const };
    const fakeReq = { headers: { 'api-key': key } } as unknown as FastifyRequest;
    // The service's own statements, as the service runs them (named: prepared once per
    // connection); a plain unnamed primary-key select for comparison.
    const keyHash = hashApiKey(key);
    const bareSelectRate = await rate(5, connections, () => pool.query('select 1'));
    const getStmtRate = await rate(5, connections, () => findInvoiceWithCredential(pool, keyHash, invoiceId));
    const pkRate = await rate(5, connections, () => findInvoice(pool, scope, invoiceId));
    const pkUnnamedRate = await rate(5, connections, () => pool.query('select id from invoices where id = $1', [invoiceId]));
    const twoTripRate = await rate(5, connections, async () => {
      const auth = await authenticate(pool, fakeReq);
      await findInvoice(pool, auth, invoiceId);
    });

    // A run that saw a non-2xx or a socket error measured the error path (rate limits, auth,
    // validation), not the route: its figures are INVALID and the process exits non-zero.
    for (const r of runs) {
      if (r.non2xx === 0 && r.errors === 0) continue;
      const isBare = r.label.startsWith('GET bare');
      const method = r.label.startsWith('PATCH') ? 'PATCH' : 'GET';
      const sample = await answer(method, `${isBare ? bareBase : base}/v1/invoices/${invoiceId}`, method === 'PATCH' ? patchBody : undefined).catch(
        (err: unknown) => ({ status: 0, text: String(err) }),
      );
      validity.invalidate(r.label, `${r.non2xx} of ${r.total} responses non-2xx (${r.codes}), ${r.errors} socket errors; one request now answers ${sample.status} ${sample.text}`);
    }

    const bareRun = runs[runs.length - 1];
    const out: string[] = [];
    out.push('');
    out.push(`bench:api  ${connections} connections, ${duration} s per run, ${os.cpus().length} cpus (${os.cpus()[0]?.model ?? '?'}), node ${process.version}`);
    out.push(`load at start: ${startLoad}; at end: ${loadAvg()}`);
    out.push(`code: ${codeAtStart}${codeVersion() === codeAtStart ? '' : `; at end: ${codeVersion()}`}`);
    out.push(
      `limits lifted on the benchmarked API (the routes are measured, not the 429 path): ${Object.entries(LIMITS_LIFTED)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
    out.push(`GET body: ${bodyBytes.length} bytes; service = main/api.ts (the API process as deployed, LOG_LEVEL=warn); bare = Fastify, logger off; autocannon in the bench process`);
    out.push('');
    out.push(
      table(
        ['target', 'req/s', 'p50 ms', 'p99 ms', 'x bare', 'requests', 'non-2xx', 'errors', 'server cpu %', 'pg cpu %', 'autocannon cpu %', 'machine busy %', 'load'],
        runs.map((r) => [
          `${r.label}${validity.mark(r.label)}`,
          fmt(r.rps, 0),
          fmt(r.p50, 0),
          fmt(r.p99, 0),
          fmt(r.rps / bareRun.rps, 3),
          r.total,
          r.non2xx,
          r.errors,
          fmt(r.serverCpu, 0),
          fmt(r.postgresCpu, 0),
          fmt(r.benchCpu, 0),
          fmt(r.machineBusy, 0),
          r.load.replace('load ', ''),
        ]),
      ),
    );
    out.push('');
    out.push(`Postgres context (pg.Pool max 20, ${connections} concurrent callers, in the bench process; ${pgLoad}):`);
    out.push(
      table(
        ['query', 'per second'],
        [
          ['select 1 (simple protocol)', fmt(bareSelectRate, 0)],
          ["GET's statement: findInvoiceWithCredential (key + invoice, one round trip, named)", fmt(getStmtRate, 0)],
          ['findInvoice: primary-key select of the invoice row (named)', fmt(pkRate, 0)],
          ['  a bare unnamed primary-key select, for comparison', fmt(pkUnnamedRate, 0)],
          ['authenticate + findInvoice (two round trips: the path of PATCH and the other routes)', fmt(twoTripRate, 0)],
        ],
      ),
    );
    const get = runs[0];
    // A target is judged only over a valid GET run and a valid bare run.
    const judged = !validity.mark(get.label) && !validity.mark(bareRun.label);
    const verdict = (ok: boolean) => (!judged ? 'INVALID (the runs include failures)' : ok ? 'met' : 'MISSED');
    out.push('');
    out.push('Targets');
    out.push(`  GET invoice ${fmt(get.rps, 0)} req/s = ${fmt(get.rps / bareRun.rps, 3)}x bare (${fmt(bareRun.rps, 0)} req/s) vs >= 0.35x: ${verdict(get.rps / bareRun.rps >= 0.35)}`);
    out.push(`  GET invoice p99 ${fmt(get.p99, 0)} ms vs < 20 ms: ${verdict(get.p99 < 20)}`);
    // The HTTP work and the database share the cores: a GET costs the bare route's time plus its
    // statement's, so the two rates measured above combine harmonically.
    const bound = 1 / (1 / bareRun.rps + 1 / getStmtRate);
    const x = get.rps / bound;
    out.push(
      `  GET invoice ${fmt(get.rps, 0)} req/s = ${fmt(x, 3)}x the combined bound 1/(1/bare + 1/SQL) = 1/(1/${fmt(bareRun.rps, 0)} + 1/${fmt(getStmtRate, 0)}) = ${fmt(bound, 0)} req/s, p99 ${fmt(get.p99, 0)} ms vs >= 0.85x with p99 < 20 ms: ${verdict(x >= 0.85 && get.p99 < 20)}`,
    );
    out.push(...profileLines);
    out.push('', ...validity.summary());
    process.stdout.write(`${out.join('\n')}\n`);
    validity.exitCode();
  } finally {
    await cleanup();
  }
}

if (process.argv[2] === '--bare') {
  await bare(Number(process.argv[3]), process.argv[4], process.argv[5]);
} else {
  await main();
}
