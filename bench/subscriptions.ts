// `npm run bench:subscriptions -- [--subscriptions 1000] [--interval 120] [--backend redis|postgres]`:
// issue 26's Proof. N subscriptions whose second period (period 1) falls due in the same second,
// charged by the real worker (main/worker.ts: the watcher, the `subscriptions.charge` job and the
// service's relayer, keyed by RELAYER_PRIVATE_KEY_<chainId>) on a fresh anvil that mines a block
// every second (as a live chain does), over a throwaway database.
//
// Set-up (untimed): the API (main/api.ts) makes N subscription checkouts (POST /pay/<link>/subscribe,
// as the page's script does); N fresh wallets, funded with anvil_setBalance and minted test USDC,
// each approve the contract and subscribe(terms) from their own address (anvil impersonates them:
// msg.sender is the wallet), all in ONE block, so every subscription starts at the same second and
// its period 1 falls due `--interval` seconds later. The worker's watcher makes the N
// subscriptions from the confirmed Subscribed logs; they must all exist before the due time.
//
// Figures (each beside its raw limit, measured in the same run):
//   1. Lateness of each period-1 charge after next_charge_at: the Charged log's block time (the
//      target, p99 < 5 s; block times are whole seconds), and for scale the relayer's send
//      (invoices.charge_sent_at) and the invoice turning paid (paid_at, after 2 confirmations).
//   2. Charges sent per second by the one relayer during the burst, beside the raw rate of the
//      same node accepting signed ERC-20 transfers from one key (signed and sent one at a time,
//      each answer awaited, as the relayer sends under its sequence lock). Target >= 0.5x.
//   3. RPC calls per charge: every request the worker made through a counting JSON-RPC proxy
//      from just before the due time until the last charge was paid, by method (the watcher's
//      polls included, and shown apart).
//   4. Gas per charge (receipt gasUsed, whole transaction) beside a plain pair of ERC-20
//      transferFrom transactions (payee's part + fee, same token, same amounts, one spender, to
//      the same payee and fee address), same run. Target <= 1.5x.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { encodeFunctionData, maxUint256, parseEventLogs, type Address, type Hex, type Log } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SUBSCRIPTION_MANAGER_ABI } from '../src/chain/subscription-manager-abi.js';
import { TEST_USDC_ABI } from '../src/devchain/contracts.js';
import { newId } from '../src/domain/ids.js';
import { splitFee } from '../src/domain/payments.js';
import type { SubscriptionCheckoutAnswer } from '../src/http/schemas/payment-page.js';
import { freePort } from '../src/lib/free-port.js';
import { provisionMerchant } from '../src/runtime/provision.js';
import { startRpcProxy, startTestChain, type RpcProxy, type TestChain } from '../test/helpers/anvil.js';
import { deleteRedisPrefix } from '../test/helpers/redis-keys.js';
import { startSmtpSink, type SmtpSink } from '../test/helpers/smtp-sink.js';
import {
  backendEnv,
  codeVersion,
  cpuDelta,
  cpuMsOf,
  cpuSnapshot,
  createBenchDatabase,
  createValidity,
  fmt,
  loadAvg,
  note,
  openBenchPool,
  percentile,
  randomSuffix,
  REDIS_URL,
  sleep,
  spawnTs,
  summarizeProfiles,
  table,
  waitForHttp,
  type BenchBackend,
  type BenchDatabase,
  type Child,
} from './support.js';

const { values: args } = parseArgs({
  options: {
    subscriptions: { type: 'string', default: process.env.BENCH_SUBSCRIPTIONS ?? '1000' },
    interval: { type: 'string', default: '120' },
    backend: { type: 'string', default: 'redis' },
    raw: { type: 'string', default: '' },
    pairs: { type: 'string', default: '20' },
  },
});
const N = Number(args.subscriptions);
const INTERVAL_S = Number(args.interval);
/** Raw transfers signed and sent from one key: as many as charges unless told. */
const RAW_N = args.raw === '' ? N : Number(args.raw);
const PAIRS = Number(args.pairs);
const BACKEND = args.backend as BenchBackend;
if (![N, INTERVAL_S, RAW_N, PAIRS].every((x) => Number.isInteger(x) && x > 0)) throw new Error('--subscriptions, --interval, --raw, --pairs: positive integers');
if (INTERVAL_S < 10) throw new Error('--interval: at least 10 (the sandbox minimum)');
if (BACKEND !== 'redis' && BACKEND !== 'postgres') throw new Error(`--backend must be redis or postgres, got "${BACKEND}"`);

/** 2 USDC a period, 1% fee: the payee's part and the fee are both non-zero transfers. */
const AMOUNT = '2';
const AMOUNT_ATOMIC = 2_000_000n;
const FEE_BPS = 100;
/** Blocks every second once the subscriptions are mined (a live chain's pace). */
const BLOCK_TIME_S = 1;
/** Explicit gas for set-up transactions sent before their approve is mined (no estimate possible). */
const SETUP_GAS = 400_000n;
/** Set-up JSON-RPC batches. */
const RPC_BATCH = 200;
/** How long after the due time every charge must be paid, else the run stops with what it has. */
const CHARGE_TIMEOUT_S = Math.max(300, Math.ceil(N / 2));

// ---------------------------------------------------------------------------------------------
// Bare JSON-RPC (set-up and the raw limit go around viem so that neither is the bottleneck).

interface RpcAnswer {
  id: number;
  result?: unknown;
  error?: { code: number; message: string };
}

async function rpcBatch(url: string, calls: { method: string; params: unknown[] }[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let i = 0; i < calls.length; i += RPC_BATCH) {
    const part = calls.slice(i, i + RPC_BATCH);
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(part.map((c, id) => ({ jsonrpc: '2.0', id, ...c }))),
    });
    const answers = (await res.json()) as RpcAnswer[];
    const byId = new Map(answers.map((a) => [a.id, a]));
    part.forEach((c, id) => {
      const a = byId.get(id);
      if (!a || a.error) throw new Error(`${c.method}: ${a?.error?.message ?? 'no answer'}`);
      out.push(a.result);
    });
  }
  return out;
}

const rpc = async (url: string, method: string, params: unknown[] = []) => (await rpcBatch(url, [{ method, params }]))[0];
const hex = (n: bigint | number) => `0x${n.toString(16)}`;

interface RawReceipt {
  status: Hex;
  gasUsed: Hex;
  blockNumber: Hex;
  transactionHash: Hex;
  logs: Log[];
}

async function receipts(url: string, hashes: Hex[]): Promise<RawReceipt[]> {
  return (await rpcBatch(
    url,
    hashes.map((h) => ({ method: 'eth_getTransactionReceipt', params: [h] })),
  )) as RawReceipt[];
}

/** Mines until the node's pool is empty (a block holds what its gas limit allows). */
async function mineAll(url: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const status = (await rpc(url, 'txpool_status')) as { pending: Hex; queued: Hex };
    if (BigInt(status.pending) === 0n && BigInt(status.queued) === 0n) return;
    await rpc(url, 'evm_mine');
  }
  throw new Error('the pool did not empty after 1000 blocks');
}

// ---------------------------------------------------------------------------------------------

interface Wallet {
  address: Address;
  email: string;
  answer?: SubscriptionCheckoutAnswer;
  subscribeTx?: Hex;
  onchainId?: bigint;
}

interface ChargeRow {
  subscription_id: string;
  onchain_id: string;
  due_ms: number;
  sent_ms: number | null;
  paid_ms: number | null;
  status: string;
  attempt_count: number;
  failure_code: string | null;
  charge_tx_hash: string | null;
}

async function main(): Promise<void> {
  const header = `bench:subscriptions --subscriptions ${N} --interval ${INTERVAL_S} --backend ${BACKEND}; ${os.cpus().length} cpus, ${loadAvg()}, ${codeVersion()}`;
  note(header);
  const validity = createValidity();
  const loads: string[] = [loadAvg()];
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-subscriptions-'));
  const prefix = `bench-subs-${randomSuffix()}`;
  let db: BenchDatabase | null = null;
  let pool: pg.Pool | null = null;
  let chain: TestChain | null = null;
  let proxy: RpcProxy | null = null;
  let sink: SmtpSink | null = null;
  const children: Child[] = [];
  try {
    db = await createBenchDatabase({ queueSchema: BACKEND === 'postgres' });
    pool = openBenchPool(db.url, 4);
    chain = await startTestChain();
    const url = chain.rpcUrl;
    proxy = await startRpcProxy(url);
    sink = await startSmtpSink();
    // Blocks of any size: the N approves and subscribes go into one block.
    await rpc(url, 'evm_setBlockGasLimit', [hex(10_000_000_000n)]);
    await rpc(url, 'anvil_autoImpersonateAccount', [true]);

    const relayerKey = generatePrivateKey();
    const relayer = privateKeyToAccount(relayerKey);
    await rpc(url, 'anvil_setBalance', [relayer.address, hex(10n ** 22n)]);
    const merchant = privateKeyToAccount(generatePrivateKey()).address;
    const { accountId, keys } = await provisionMerchant(pool, { id: newId('acct'), name: 'Bench', email: null, platformFeeBps: FEE_BPS, settlementAddress: merchant });
    void accountId;

    // The worker watches through the counting proxy; the API needs no chain calls of its own.
    const workerChains = chain.writeChainsFile(mkdtempSync(path.join(tmp, 'w-')), { rpc_urls: [proxy.url] });
    const apiChains = chain.writeChainsFile(mkdtempSync(path.join(tmp, 'a-')));
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const common = {
      DATABASE_URL: db.url,
      ...backendEnv(BACKEND, prefix),
      [`RELAYER_PRIVATE_KEY_${chain.chainId}`]: relayerKey,
      // Sandbox emails (these are sandbox objects) go to SANDBOX_SMTP_URL, never to SMTP_URL.
      SMTP_URL: sink.url,
      SANDBOX_SMTP_URL: sink.url,
      MAIL_OUTBOX_DIR: path.join(tmp, 'outbox'),
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
    };
    const api = spawnTs('api', 'main/api.ts', [], {
      ...common,
      CHAINS_FILE: apiChains,
      PORT: String(port),
      HOST: '127.0.0.1',
      PAYMENT_PAGE_BASE: `${origin}/pay`,
      RATE_LIMIT_MAX: '1000000000',
      AUTH_FAILURE_LIMIT: '1000000',
      CHECKOUT_LIMIT_PER_LINK: '1000000',
      CHECKOUT_LIMIT_PER_EMAIL: '1000000',
    });
    children.push(api);
    await waitForHttp(`${origin}/v1/invoices/x`, 60_000);
    const call = async (method: string, p: string, body?: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${origin}${p}`, {
        method,
        headers: { 'api-key': keys.sandbox, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${method} ${p}: ${res.status} ${text}`);
      return (JSON.parse(text) as { data: Record<string, unknown> }).data;
    };
    const product = await call('POST', '/v1/products', { name: 'Bench club', prices: [{ network: 'local', amount: AMOUNT, cadence: 'custom', interval_seconds: INTERVAL_S }] });
    const priceId = (product.prices as { id: string }[])[0].id;
    const link = await call('POST', '/v1/payment-links', { name: 'Bench club', price_id: priceId });
    const linkId = link.id as string;

    // ---- N wallets: funded, a checkout each, approve + subscribe in one block ----
    const wallets: Wallet[] = Array.from({ length: N }, (_, i) => {
      const address = privateKeyToAccount(generatePrivateKey()).address;
      return { address, email: `sub-${i}@bench.example` };
    });
    note(`set-up: ${N} checkouts over HTTP`);
    let nextCheckout = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (nextCheckout < wallets.length) {
          const w = wallets[nextCheckout++];
          const res = await fetch(`${origin}/pay/${linkId}/subscribe`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', origin, 'sec-fetch-site': 'same-origin' },
            body: JSON.stringify({ customer_email: w.email }),
          });
          const text = await res.text();
          if (res.status !== 200) throw new Error(`checkout for ${w.email}: ${res.status} ${text}`);
          w.answer = JSON.parse(text) as SubscriptionCheckoutAnswer;
        }
      }),
    );
    await api.stop();
    children.splice(children.indexOf(api), 1);

    note(`set-up: funding ${N} wallets (ETH and ${N} x 10 periods of test USDC)`);
    await rpc(url, 'evm_setAutomine', [false]);
    const funder = chain.payers[0].address;
    await rpcBatch(url, wallets.map((w) => ({ method: 'anvil_setBalance', params: [w.address, hex(10n ** 19n)] })));
    const fundNonce = BigInt((await rpc(url, 'eth_getTransactionCount', [funder, 'pending'])) as string);
    const mintData = (to: Address) => encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'mint', args: [to, AMOUNT_ATOMIC * 10n] });
    await rpcBatch(
      url,
      wallets.map((w, i) => ({ method: 'eth_sendTransaction', params: [{ from: funder, to: chain!.token, data: mintData(w.address), gas: hex(100_000n), nonce: hex(fundNonce + BigInt(i)) }] })),
    );
    await mineAll(url);

    note(`set-up: ${N} approves and subscribes, mined in one block`);
    const approveHashes = (await rpcBatch(
      url,
      wallets.map((w) => ({
        method: 'eth_sendTransaction',
        params: [{ from: w.address, to: chain!.token, gas: hex(SETUP_GAS), nonce: '0x0', data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'approve', args: [w.answer!.contract_address as Address, BigInt(w.answer!.allowance_atomic)] }) }],
      })),
    )) as Hex[];
    const subscribeHashes = (await rpcBatch(
      url,
      wallets.map((w) => {
        const t = w.answer!.terms;
        const data = encodeFunctionData({
          abi: SUBSCRIPTION_MANAGER_ABI,
          functionName: 'subscribe',
          args: [
            {
              payee: t.payee as Address,
              token: t.token as Address,
              amount: BigInt(t.amount),
              period: t.period,
              feeBps: t.fee_bps,
              feeAddress: t.fee_address as Address,
              operator: t.operator as Address,
              endsAt: t.ends_at,
              checkoutReference: t.checkout_reference as Hex,
            },
          ],
        });
        return { method: 'eth_sendTransaction', params: [{ from: w.address, to: w.answer!.contract_address, gas: hex(SETUP_GAS), nonce: '0x1', data }] };
      }),
    )) as Hex[];
    await rpc(url, 'evm_mine');
    await mineAll(url);
    const approveReceipts = await receipts(url, approveHashes);
    const subscribeReceipts = await receipts(url, subscribeHashes);
    const bad = [...approveReceipts, ...subscribeReceipts].filter((r) => r === null || r.status !== '0x1').length;
    if (bad > 0) throw new Error(`set-up: ${bad} approve/subscribe transactions failed or not mined`);
    const subscribeBlocks = new Set(subscribeReceipts.map((r) => r.blockNumber));
    subscribeReceipts.forEach((r, i) => {
      const [log] = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Subscribed', logs: r.logs });
      wallets[i].onchainId = log.args.id;
      wallets[i].subscribeTx = r.transactionHash;
    });
    const startedAts = new Set<number>();
    for (const b of subscribeBlocks) startedAts.add(Number(BigInt(((await rpc(url, 'eth_getBlockByNumber', [b, false])) as { timestamp: Hex }).timestamp)));
    const dueMs = Math.min(...startedAts) * 1000 + INTERVAL_S * 1000;
    note(`set-up: subscribed in ${subscribeBlocks.size} block(s), started at ${[...startedAts].join(', ')}; period 1 due ${new Date(dueMs).toISOString()} (in ${fmt((dueMs - Date.now()) / 1000, 1)} s)`);
    // A live chain's pace from now on: a block every second.
    await rpc(url, 'evm_setIntervalMining', [BLOCK_TIME_S]);

    // ---- the worker: the watcher makes the N subscriptions, then charges period 1 ----
    const workerPort = await freePort();
    const profileDir = process.env.BENCH_CPU_PROF ? mkdtempSync(path.join(tmp, 'prof-')) : null;
    const worker = spawnTs(
      'worker',
      'main/worker.ts',
      [],
      { ...common, CHAINS_FILE: workerChains, WORKER_PORT: String(workerPort) },
      profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
    );
    children.push(worker);
    // The worker's warnings and errors (LOG_LEVEL warn): counted, the first few kept.
    const workerLog = { warn: 0, error: 0, first: [] as string[] };
    const onLine = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        const level = /"level":(\d+)/.exec(line)?.[1];
        if (level === undefined) continue;
        if (Number(level) >= 50) workerLog.error++;
        else if (Number(level) >= 40) workerLog.warn++;
        else continue;
        if (workerLog.first.length < 4) workerLog.first.push(line.slice(0, 300));
      }
    };
    worker.child.stdout!.on('data', onLine);
    worker.child.stderr!.on('data', onLine);
    const workerStarted = Date.now();
    const countSubs = async () => (await pool!.query<{ n: number }>(`select count(*)::int as n from subscriptions`)).rows[0].n;
    for (;;) {
      const n = await countSubs();
      if (n === N) break;
      if (Date.now() > dueMs - 2_000) {
        validity.invalidate('lateness', `only ${n} of ${N} subscriptions made by the watcher 2 s before the due time (raise --interval)`);
        break;
      }
      await sleep(250);
    }
    const madeS = (Date.now() - workerStarted) / 1000;
    note(`watcher made ${await countSubs()} subscriptions in ${fmt(madeS, 1)} s after the worker started; waiting for the due time`);
    loads.push(loadAvg());
    const { rows: nca } = await pool.query<{ n: number; lo: Date; hi: Date }>(`select count(*)::int as n, min(next_charge_at) as lo, max(next_charge_at) as hi from subscriptions`);
    note(`next_charge_at from ${nca[0].lo?.toISOString()} to ${nca[0].hi?.toISOString()}`);

    // The proxy counts from just before the due time until the last charge is paid.
    await sleep(Math.max(0, dueMs - Date.now() - 500));
    const emailsAtDue = sink.messages.length;
    const receiptsAtDue = (await pool.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and status = 'sent'`)).rows[0].n;
    proxy.resetCalls();
    const rpcTime = new Map<string, number>();
    let inFlight = 0;
    let busySince = 0;
    let rpcBusyMs = 0;
    proxy.rewrite(async (req, real) => {
      if (inFlight++ === 0) busySince = performance.now();
      const t = performance.now();
      try {
        return await real();
      } finally {
        rpcTime.set(String(req.method), (rpcTime.get(String(req.method)) ?? 0) + performance.now() - t);
        if (--inFlight === 0) rpcBusyMs += performance.now() - busySince;
      }
    });
    const countFrom = Date.now();
    const pgBackends = new RegExp(`postgres: .*${db.name}`);
    const cpu0 = { worker: cpuMsOf(worker.pid), anvil: cpuMsOf(chain.anvil.pid), pg: cpuSnapshot(pgBackends) };
    const paidCount = async () =>
      (await pool!.query<{ n: number }>(`select count(*)::int as n from invoices where period_index = 1 and status = 'paid'`)).rows[0].n;
    let last = -1;
    for (;;) {
      const n = await paidCount();
      if (n !== last) {
        last = n;
      }
      if (n >= N) break;
      if (Date.now() > dueMs + CHARGE_TIMEOUT_S * 1000) {
        validity.invalidate('lateness', `only ${n} of ${N} period-1 invoices paid ${CHARGE_TIMEOUT_S} s after the due time`);
        break;
      }
      await sleep(200);
    }
    const countMs = Date.now() - countFrom;
    proxy.rewrite(null);
    const cpu = { worker: cpuMsOf(worker.pid) - cpu0.worker, anvil: cpuMsOf(chain.anvil.pid) - cpu0.anvil, pg: cpuDelta(cpu0.pg, cpuSnapshot(pgBackends)) };
    const metrics = await fetch(`http://127.0.0.1:${workerPort}/metrics`).then((r) => r.text(), () => '');
    const workLines = metrics.split('\n').filter((l) => /^subscription_work_total\{/.test(l) && !/ 0$/.test(l));
    const byMethod = new Map<string, number>();
    for (const m of METHODS) byMethod.set(m, proxy.calls(m));
    const totalCalls = proxy.calls();
    loads.push(loadAvg());
    note(`charges: ${last} of ${N} paid ${fmt((Date.now() - dueMs) / 1000, 1)} s after the due time; ${totalCalls} RPC calls`);
    await worker.stop();
    children.splice(children.indexOf(worker), 1);

    // ---- what happened to each charge ----
    const { rows: charges } = await pool.query<ChargeRow>(
      `select s.id as subscription_id, s.onchain_id::text,
         (extract(epoch from i.period_start) * 1000)::float8 as due_ms,
         (extract(epoch from i.charge_sent_at) * 1000)::float8 as sent_ms,
         (extract(epoch from i.paid_at) * 1000)::float8 as paid_ms,
         i.status::text, i.attempt_count, i.failure_code, i.charge_tx_hash
       from subscriptions s left join invoices i on i.subscription_id = s.id and i.period_index = 1`,
    );
    const missing = charges.filter((c) => c.status !== 'paid').length;
    validity.expect(charges.length === N && missing === 0, 'lateness', `${N - charges.length} subscriptions not made, ${missing} period-1 invoices not paid`);
    const failed = charges.filter((c) => c.failure_code !== null || c.attempt_count > 1).length;
    validity.expect(failed === 0, 'lateness', `${failed} period-1 invoices with a failed attempt`);

    // The Charged logs of period 1 (block time of each), and each charge transaction's gas.
    const chargedLogs = (await rpc(url, 'eth_getLogs', [{ address: chain.subscriptionManager, fromBlock: '0x0', toBlock: 'latest' }])) as Log[];
    const charged = parseEventLogs({ abi: SUBSCRIPTION_MANAGER_ABI, eventName: 'Charged', logs: chargedLogs });
    const period1 = charged.filter((l) => l.args.periodIndex === 1);
    const perId = new Map<string, number>();
    for (const l of period1) perId.set(l.args.id.toString(), (perId.get(l.args.id.toString()) ?? 0) + 1);
    const twice = [...perId.values()].filter((v) => v > 1).length;
    validity.expect(twice === 0, 'lateness', `${twice} subscriptions charged twice for period 1`);
    validity.expect(period1.length === N, 'lateness', `${period1.length} Charged logs for period 1, not ${N}`);
    const blockTimes = new Map<string, number>();
    for (const b of new Set(period1.map((l) => hex(l.blockNumber!)))) {
      blockTimes.set(b, Number(BigInt(((await rpc(url, 'eth_getBlockByNumber', [b, false])) as { timestamp: Hex }).timestamp)) * 1000);
    }
    const dueById = new Map(charges.map((c) => [c.onchain_id, c.due_ms]));
    const minedLate = period1.map((l) => (blockTimes.get(hex(l.blockNumber!))! - dueById.get(l.args.id.toString())!) / 1000);
    const sentLate = charges.filter((c) => c.sent_ms !== null).map((c) => (c.sent_ms! - c.due_ms) / 1000);
    const paidLate = charges.filter((c) => c.paid_ms !== null).map((c) => (c.paid_ms! - c.due_ms) / 1000);
    const chargeReceipts = await receipts(url, [...new Set(period1.map((l) => l.transactionHash!))]);
    const chargeGas = chargeReceipts.map((r) => Number(BigInt(r.gasUsed)));
    const { rows: deliveryRows } = await pool.query<{ kind: string; status: string; n: number }>(
      `select kind::text, status::text, count(*)::int as n from deliveries group by 1, 2 order by 1, 2`,
    );
    const emailsAtEnd = sink.messages.length;
    const { rows: relayerRows } = await pool.query<{ purpose: string; status: string; n: number }>(
      `select purpose::text, status::text, count(*)::int as n from relayer_transactions group by 1, 2 order by 1, 2`,
    );

    // Charges per second: the relayer's sends during the burst (first to last charge_sent_at).
    const sentTimes = charges.filter((c) => c.sent_ms !== null).map((c) => c.sent_ms!).sort((a, b) => a - b);
    const burstS = sentTimes.length > 1 ? (sentTimes[sentTimes.length - 1] - sentTimes[0]) / 1000 : NaN;
    const chargesPerS = sentTimes.length > 1 ? (sentTimes.length - 1) / burstS : NaN;
    const lastMinedS = Math.max(...minedLate);
    const endToEndPerS = N / lastMinedS;

    // ---- raw limits, same node, same mining (a block a second) ----
    note(`raw: ${RAW_N} ERC-20 transfers signed and sent from one key, one at a time`);
    loads.push(loadAvg());
    const raw = await rawTransfers(chain, chain.rpcUrl, RAW_N);
    const rawProxied = await rawTransfers(chain, proxy.url, RAW_N);
    note(`raw: ${fmt(raw.perS, 1)} transfers/s accepted (${fmt(rawProxied.perS, 1)}/s through the counting proxy)`);
    note(`gas: ${PAIRS} transferFrom pairs (payee + fee) from one spender`);
    const { amountAtomic: payeeAtomic, feeAtomic } = splitFee(AMOUNT_ATOMIC, FEE_BPS);
    const pairGasFinite = await transferFromPairs(chain, merchant, payeeAtomic, feeAtomic, PAIRS, false);
    const pairGas = await transferFromPairs(chain, merchant, payeeAtomic, feeAtomic, PAIRS, true);
    loads.push(loadAvg());

    let profileLines: string[] = [];
    if (profileDir) {
      const files = readdirSync(profileDir).map((f) => path.join(profileDir, f));
      const prof = summarizeProfiles(files, N, ['subscriptionsCharge', 'chargeOne', 'simulateCharge', 'send', 'settle', 'ensurePeriodInvoice', 'run']);
      profileLines = [
        `  worker CPU profile (whole life, set-up included): ${fmt(prof.totalMs, 0)} ms; inclusive ms: ${Object.entries(prof.inclusive).map(([k, v]) => `${k} ${fmt(v, 0)}`).join(', ')}`,
        ...table(['self time by package', 'ms', '%', 'ms/charge'], prof.rows).split('\n').map((l) => `    ${l}`),
      ];
    }

    // ---- print ----
    const p = (xs: number[], q: number) => percentile(xs, q);
    const lateP99 = p(minedLate, 99);
    const rateRatio = chargesPerS / raw.perS;
    const gasMedian = p(chargeGas, 50);
    // The stricter of the two pairs is the limit: the one without allowance writes.
    const pairMedian = p(pairGas, 50);
    const pairFiniteMedian = p(pairGasFinite, 50);
    const gasRatio = gasMedian / pairMedian;
    const watcherMethods = ['eth_blockNumber', 'eth_getBlockByNumber', 'eth_getLogs'];
    const watcherCalls = watcherMethods.reduce((s, m) => s + (byMethod.get(m) ?? 0), 0);
    const relayerCalls = totalCalls - watcherCalls;
    const rows: (string | number)[][] = [
      [
        `lateness s, Charged block - next_charge_at, p50 / p99 / max (${minedLate.length})`,
        `${fmt(p(minedLate, 50), 0)} / ${fmt(lateP99, 0)} / ${fmt(lastMinedS, 0)}${validity.mark('lateness')}`,
        '-',
        '-',
        'p99 < 5 s',
        validity.mark('lateness') ? 'INVALID' : lateP99 < 5 ? 'met' : 'NOT MET',
      ],
      [`charges sent/s by one relayer (burst of ${sentTimes.length})`, fmt(chargesPerS, 1), `${fmt(raw.perS, 1)} raw transfers/s, one key`, `${fmt(rateRatio, 2)}x`, '>= 0.5x', rateRatio >= 0.5 ? 'met' : 'NOT MET'],
      [`RPC calls per charge (all the worker's, ${fmt(countMs / 1000, 0)} s)`, fmt(totalCalls / N, 1), '-', '-', '-', ''],
      [`gas per charge, median of ${chargeGas.length}`, fmt(gasMedian, 0), `${fmt(pairMedian, 0)} transferFrom pair (max allowance)`, `${fmt(gasRatio, 2)}x`, '<= 1.5x', gasRatio <= 1.5 ? 'met' : 'NOT MET'],
    ];
    const lines = [
      header,
      '',
      table(['figure', 'project', 'raw limit (same run)', 'ratio', 'target', ''], rows),
      '',
      `Set-up: ${N} subscribes in ${subscribeBlocks.size} block(s); the watcher made the ${N} subscriptions ${fmt(madeS, 1)} s after the worker started (interval ${INTERVAL_S} s, all period 1 due at ${new Date(dueMs).toISOString()}).`,
      `  at the due time: ${receiptsAtDue} of period 0's ${N} receipts sent, ${emailsAtDue} emails in the sink (receipts still rendering compete with the charges for the worker's CPU)`,
      `  after the last charge was paid: ${emailsAtEnd} emails in the sink; deliveries: ${deliveryRows.map((r) => `${r.kind} ${r.status} ${r.n}`).join(', ') || 'none'}`,
      `Lateness s after next_charge_at, p50 / p90 / p99 / max:`,
      `  charge sent (charge_sent_at)   ${[50, 90, 99].map((q) => fmt(p(sentLate, q), 2)).join(' / ')} / ${fmt(Math.max(...sentLate), 2)}  min ${fmt(Math.min(...sentLate), 2)}`,
      `  Charged block time             ${[50, 90, 99].map((q) => fmt(p(minedLate, q), 0)).join(' / ')} / ${fmt(lastMinedS, 0)}  (whole seconds)`,
      `  invoice paid (2 confirmations) ${[50, 90, 99].map((q) => fmt(p(paidLate, q), 2)).join(' / ')} / ${fmt(Math.max(...paidLate), 2)}`,
      `Charges: first sent ${fmt((sentTimes[0] - dueMs) / 1000, 2)} s after the due time, last ${fmt((sentTimes[sentTimes.length - 1] - dueMs) / 1000, 2)} s; ${fmt(chargesPerS, 1)} sent/s over the burst; ${fmt(endToEndPerS, 1)}/s due -> last mined.`,
      `  raw: ${RAW_N} signed transfers from one key, eth_sendRawTransaction one at a time: ${fmt(raw.seconds, 2)} s (${fmt(raw.perS, 1)}/s), all mined ${fmt(raw.minedS, 2)} s after the first send; through the worker's counting proxy ${fmt(rawProxied.perS, 1)}/s`,
      `  relayer transactions: ${relayerRows.map((r) => `${r.purpose} ${r.status} ${r.n}`).join(', ')}`,
      `RPC calls through the proxy, ${fmt(countMs / 1000, 1)} s from 0.5 s before the due time to the last paid: ${totalCalls} = ${fmt(totalCalls / N, 1)} per charge (relayer and job ${fmt(relayerCalls / N, 1)}, watcher ${fmt(watcherCalls / N, 1)}):`,
      ...[...byMethod.entries(), ['other', totalCalls - [...byMethod.values()].reduce((a, b) => a + b, 0)] as [string, number]]
        .filter(([, v]) => v > 0)
        .sort((a, b) => b[1] - a[1])
        .map(([m, v]) => `  ${m.padEnd(28)} ${String(v).padStart(7)}  ${fmt(v / N, 2).padStart(6)} per charge  ${fmt((rpcTime.get(m) ?? 0) / N, 1).padStart(6)} ms in flight per charge`),
      `  RPC in flight (at least one call) ${fmt(rpcBusyMs / 1000, 1)} s of the ${fmt(countMs / 1000, 1)} s`,
      `  where the wall time went (${fmt(countMs / 1000, 1)} s): CPU ms per charge: worker ${fmt(cpu.worker / N, 1)}, anvil ${fmt(cpu.anvil / N, 1)}, Postgres backends ${fmt(cpu.pg / N, 1)} (wall ${fmt(countMs / N, 1)} ms per charge, 2 cores shared with the machine's other work)`,
      `  the worker's log: ${workerLog.warn} warnings, ${workerLog.error} errors${workerLog.first.length ? `; first: ${workerLog.first.join(' | ')}` : ''}`,
      `  the worker's subscription_work_total: ${workLines.map((l) => l.replace(/^subscription_work_total/, '')).join(', ') || '(not read)'}`,
      ...profileLines,
      `Gas: a charge transaction ${fmt(gasMedian, 0)} (min ${fmt(Math.min(...chargeGas), 0)}, max ${fmt(Math.max(...chargeGas), 0)}) beside transferFrom ${payeeAtomic} + ${feeAtomic} atomic as two transactions (median of ${PAIRS}): ${fmt(pairMedian, 0)} with an unlimited allowance (the limit above), ${fmt(pairFiniteMedian, 0)} with a finite one (${fmt(gasMedian / pairFiniteMedian, 2)}x)`,
      `load: ${loads.join(' | ')}`,
      '',
      ...validity.summary(),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    validity.exitCode();
  } finally {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
    await proxy?.close().catch(() => undefined);
    await chain?.stop().catch(() => undefined);
    await sink?.close().catch(() => undefined);
    await pool?.end().catch(() => undefined);
    if (BACKEND === 'redis') await deleteRedisPrefix(REDIS_URL, prefix).catch(() => undefined);
    await db?.drop().catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  }
}

const METHODS = [
  'eth_call',
  'eth_estimateGas',
  'eth_sendRawTransaction',
  'eth_getTransactionCount',
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getBalance',
  'eth_maxPriorityFeePerGas',
  'eth_feeHistory',
  'eth_gasPrice',
  'eth_chainId',
  'eth_blockNumber',
  'eth_getBlockByNumber',
  'eth_getLogs',
];

/**
 * The raw limit of sending: `n` ERC-20 transfers signed from one key (the relayer's work: sign,
 * then eth_sendRawTransaction, the next only once the node answered), on the same node, mining a
 * block a second. Returns the acceptance rate and when the last was mined.
 */
async function rawTransfers(chain: TestChain, sendUrl: string, n: number): Promise<{ perS: number; seconds: number; minedS: number }> {
  const account = privateKeyToAccount(generatePrivateKey());
  const url = chain.rpcUrl;
  await rpc(url, 'anvil_setBalance', [account.address, hex(10n ** 22n)]);
  await rpc(url, 'eth_sendTransaction', [{ from: chain.payers[0].address, to: chain.token, data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'mint', args: [account.address, 10n ** 15n] }) }]);
  await waitMined(url, async () => BigInt((await rpc(url, 'eth_call', [{ to: chain.token, data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [account.address] }) }, 'latest'])) as string) > 0n);
  const fees = { maxFeePerGas: 10n ** 11n, maxPriorityFeePerGas: 10n ** 9n };
  const to = privateKeyToAccount(generatePrivateKey()).address;
  // Warm-up: the first signatures are slow (the curve's tables, JIT); the relayer's are warm.
  for (let i = 0; i < 50; i++) await account.signTransaction({ chainId: chain.chainId, type: 'eip1559', to, nonce: 1_000_000 + i, gas: 21_000n, ...fees });
  const hashes: Hex[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const signed = await account.signTransaction({
      chainId: chain.chainId,
      type: 'eip1559',
      to: chain.token,
      data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'transfer', args: [to, 1n] }),
      nonce: i,
      gas: 80_000n,
      ...fees,
    });
    hashes.push((await rpc(sendUrl, 'eth_sendRawTransaction', [signed])) as Hex);
  }
  const seconds = (performance.now() - t0) / 1000;
  await waitMined(url, async () => (await receipts(url, [hashes[hashes.length - 1]]))[0] !== null);
  const minedS = (performance.now() - t0) / 1000;
  const got = await receipts(url, hashes);
  const failed = got.filter((r) => r === null || r.status !== '0x1').length;
  if (failed > 0) throw new Error(`raw: ${failed} of ${n} transfers failed or not mined`);
  return { perS: n / seconds, seconds, minedS };
}

/**
 * Gas of the plain alternative to a charge: one spender moving the period's amount from an owner
 * with two ERC-20 transferFrom transactions (the payee's part, then the fee), to the same payee
 * and fee address as the charges, from an owner who already holds tokens, as a subscriber does.
 * Each pair's two receipts' gasUsed summed (21,000 base gas each counted, as a charge's).
 */
async function transferFromPairs(chain: TestChain, payee: Address, payeeAtomic: bigint, feeAtomic: bigint, pairs: number, unlimited: boolean): Promise<number[]> {
  const url = chain.rpcUrl;
  const owner = privateKeyToAccount(generatePrivateKey()).address;
  const spender = privateKeyToAccount(generatePrivateKey()).address;
  await rpcBatch(url, [
    { method: 'anvil_setBalance', params: [owner, hex(10n ** 19n)] },
    { method: 'anvil_setBalance', params: [spender, hex(10n ** 19n)] },
  ]);
  const setup = (await rpcBatch(url, [
    { method: 'eth_sendTransaction', params: [{ from: chain.payers[0].address, to: chain.token, data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'mint', args: [owner, AMOUNT_ATOMIC * BigInt(pairs + 1)] }) }] },
    // Finite: as a subscriber's allowance to the contract, each transferFrom spends it (a storage
    // write). Unlimited: OpenZeppelin's ERC20 leaves a max allowance untouched, the cheapest pair.
    { method: 'eth_sendTransaction', params: [{ from: owner, to: chain.token, data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'approve', args: [spender, unlimited ? maxUint256 : AMOUNT_ATOMIC * BigInt(pairs + 1)] }) }] },
  ])) as Hex[];
  await waitMined(url, async () => (await receipts(url, setup)).every((r) => r !== null));
  const out: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const hashes = (await rpcBatch(url, [
      { method: 'eth_sendTransaction', params: [{ from: spender, to: chain.token, gas: hex(100_000n), data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'transferFrom', args: [owner, payee, payeeAtomic] }) }] },
      { method: 'eth_sendTransaction', params: [{ from: spender, to: chain.token, gas: hex(100_000n), data: encodeFunctionData({ abi: TEST_USDC_ABI, functionName: 'transferFrom', args: [owner, chain.feeAddress, feeAtomic] }) }] },
    ])) as Hex[];
    await waitMined(url, async () => (await receipts(url, hashes)).every((r) => r !== null));
    const got = await receipts(url, hashes);
    if (got.some((r) => r.status !== '0x1')) throw new Error('transferFrom pair reverted');
    out.push(got.reduce((s, r) => s + Number(BigInt(r.gasUsed)), 0));
  }
  return out;
}

async function waitMined(url: string, done: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  void url;
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`not mined within ${timeoutMs} ms`);
    await sleep(100);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
