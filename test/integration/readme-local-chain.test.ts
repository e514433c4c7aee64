// README "Optional: pay it on a real local chain", as a newcomer runs it: real npm processes, each
// command of the README in turn (`npm run chain`, `npm start`, `npm run demo`, `npm run pay --
// <reference>`, `npm run subscribe -- <link>`), nothing configured but where things go, so that a
// developer's own var/ is never touched: a temporary CHAIN_STATE_DIR on a free CHAIN_PORT, the
// embedded PostgreSQL of `npm start` in a temporary folder (the other commands share it, as beside
// a newcomer's `npm start`), a free PORT, a temporary outbox and demo keys file. The invoice turns
// paid and its receipt lands; the 30-second plan's first period is paid by the subscribe and the
// worker charges the second through the local relayer: two receipts, as the README promises
// "within a minute". SIGTERM to each long-running npm process leaves nothing running.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import { DEFAULT_SUBSCRIBER_EMAIL } from '../../src/devchain/subscribe-command.js';
import { ROOT, waitUntil } from '../helpers/worker.js';
import { alive, commandOf, descendants, procOf, signal, type Proc } from '../helpers/proc.js';

/** Past the README's minute, with room for a loaded 2-core machine: the period itself is 30 s. */
const TWO_RECEIPTS_AFTER_SUBSCRIBE_MS = 75_000;

interface NpmRun {
  script: string;
  npm: ChildProcess;
  stdout(): string;
  /** stdout and stderr, interleaved as they came. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** node (and anvil, postgres) as seen below npm once it was ready; filled by the test. */
  below: Proc[];
}

function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('README: pay it on a real local chain (npm run chain, npm start, demo, pay, subscribe)', () => {
  let dir: string;
  let env: Record<string, string>;
  let chainPort: number;
  let apiPort: number;
  let outbox: string;
  const runs: NpmRun[] = [];

  const npmRun = (script: string, args: string[] = []): NpmRun => {
    const npm = spawn('npm', ['run', script, ...(args.length > 0 ? ['--', ...args] : [])], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let all = '';
    npm.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      all += c.toString('utf8');
    });
    npm.stderr?.on('data', (c: Buffer) => (all += c.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })));
    const run: NpmRun = { script, npm, stdout: () => out, output: () => all, exited, below: [] };
    runs.push(run);
    return run;
  };

  /** A long-running command, once `ready` says it is; its processes recorded for the end. */
  const startUntil = async (run: NpmRun, ready: (out: string) => boolean, timeoutMs: number): Promise<void> => {
    let gone = false;
    void run.exited.then(() => (gone = true));
    await waitUntil(
      async () => {
        if (gone) throw new Error(`npm run ${run.script} exited early:\n${run.output()}`);
        return ready(run.stdout());
      },
      timeoutMs,
      100,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: npm run ${run.script} not ready; its output:\n${run.output().slice(-4000)}`);
    });
    run.below = descendants(run.npm.pid as number);
  };

  /** A command that runs to its end: exit 0 expected, its output in the failure message. */
  const runToEnd = async (script: string, args: string[] = []): Promise<NpmRun> => {
    const run = npmRun(script, args);
    const exit = await run.exited;
    expect(exit, run.output()).toEqual({ code: 0, signal: null });
    return run;
  };

  /** SIGTERM to the npm process alone, as a terminal's process manager or `kill <pid>` sends it. */
  const stop = async (run: NpmRun): Promise<void> => {
    run.npm.kill('SIGTERM');
    expect(await run.exited, run.output().slice(-4000)).toEqual({ code: 0, signal: null });
    await waitUntil(async () => run.below.every((p) => !alive(p)), 30_000, 100).catch(() => {
      throw new Error(`left running after npm run ${run.script} exited: ${run.below.filter(alive).map(commandOf).join('; ')}`);
    });
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'readme-local-chain-'));
    // As root the embedded server runs as the `postgres` user, which must reach its folder.
    await chmod(dir, 0o755);
    chainPort = await freePort();
    apiPort = await freePort();
    outbox = path.join(dir, 'outbox');
    env = {
      CHAIN_PORT: String(chainPort),
      CHAIN_STATE_DIR: path.join(dir, 'chain'),
      EMBEDDED_POSTGRES_DIR: path.join(dir, 'pg'),
      MAIL_OUTBOX_DIR: outbox,
      DEMO_KEYS_FILE: path.join(dir, 'demo-keys.json'),
      // The payment page's links follow it (PAYMENT_PAGE_BASE unset: http://localhost:<PORT>/pay).
      PORT: String(apiPort),
      PAYMENT_PAGE_BASE: '',
      METRICS_PORT: '0',
      WORKER_PORT: '0',
      PDF_RENDER_THREADS: '0',
      // Nothing of the test's own services: the embedded database, the Postgres queue backend, the
      // chains file `npm run chain` writes (found, not named) and the relayer key beside it.
      DATABASE_URL: '',
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: '',
      QUEUE_BACKEND: '',
      CHAINS_FILE: '',
      RELAYER_PRIVATE_KEY_FILE: '',
      SMTP_URL: '',
      SANDBOX_SMTP_URL: '',
    };
  });

  afterAll(async () => {
    // A failed test leaves nothing running: npm, then whatever it left behind.
    for (const run of runs) {
      if (run.npm.exitCode === null && run.npm.signalCode === null) {
        run.npm.kill('SIGTERM');
        await Promise.race([run.exited, new Promise((r) => setTimeout(r, 30_000))]);
      }
      for (const p of run.below) signal(p, 'SIGKILL');
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 90_000);

  it('the invoice is paid and its receipt lands; the subscription pays two periods, two receipts; everything stops on SIGTERM', async () => {
    // The README's quick start first, with no chain yet: its demo makes the 30-second plan on
    // base-sepolia. The demo run again on the local chain must make one there (it printed the
    // first one's link, which `npm run subscribe` refused: no subscription contract there).
    const quick = npmRun('start');
    await startUntil(quick, (out) => out.includes('"msg":"ready"'), 150_000);
    const first = await runToEnd('demo');
    const firstLink = (JSON.parse(first.stdout().trim().split('\n').at(-1)!) as { subscription_payment_link_id: string }).subscription_payment_link_id;
    expect(firstLink).toMatch(/^plink_/);
    await stop(quick);

    // Terminal 1.
    const chain = npmRun('chain');
    await startUntil(chain, (out) => out.includes('Ctrl-C stops the chain'), 90_000);
    expect(chain.stdout()).toContain('contracts deployed now');
    expect(existsSync(path.join(dir, 'chain', 'chains.json'))).toBe(true);
    expect(chain.below.map(commandOf).some((c) => c.includes('anvil'))).toBe(true);

    // Terminal 2: stdout is a pipe, so the ready block is one JSON `ready` line.
    const start = npmRun('start');
    await startUntil(start, (out) => out.includes('"msg":"ready"'), 150_000);
    const ready = JSON.parse(start.stdout().split('\n').find((l) => l.includes('"msg":"ready"'))!) as { api_url: string; chains: string[]; mail: { sandbox: string } };
    expect(ready.api_url).toBe(`http://127.0.0.1:${apiPort}`);
    expect(ready.chains).toEqual([expect.stringMatching(/^local \(31337\), \d+ confirmations?$/)]);
    expect(ready.mail.sandbox).toBe(`.eml files in ${outbox}`);
    expect(start.stdout()).toContain('chains file found');

    // Terminal 3: the lines a newcomer copies from.
    const demo = await runToEnd('demo');
    const payLine = /^ {2}npm run pay -- (0x[0-9a-f]+)$/m.exec(demo.stdout());
    const subscribeLine = /^ {2}npm run subscribe -- (plink_[0-9A-Za-z]+)$/m.exec(demo.stdout());
    expect(payLine, demo.stdout()).not.toBeNull();
    expect(subscribeLine, demo.stdout()).not.toBeNull();
    const reference = payLine![1];
    const linkId = subscribeLine![1];
    expect(linkId).not.toBe(firstLink);
    const summary = JSON.parse(demo.stdout().trim().split('\n').at(-1)!) as { keys: { sandbox: string }; invoice_id: string; subscription_payment_link_id: string };
    expect(summary.subscription_payment_link_id).toBe(linkId);

    const api = async <T>(url: string): Promise<T> => {
      const res = await fetch(`${ready.api_url}${url}`, { headers: { 'api-key': summary.keys.sandbox } });
      const body = await res.text();
      expect(res.status, body).toBe(200);
      return (JSON.parse(body) as { data: T }).data;
    };
    interface Invoice {
      id: string;
      code: string;
      status: string;
    }
    const invoice = await api<Invoice & { payment_instructions: { payment_reference: string } }>(`/v1/invoices/${summary.invoice_id}`);
    expect(invoice.status).toBe('open');
    expect(invoice.payment_instructions.payment_reference).toBe(reference);
    const receiptsOf = (code: string) => (existsSync(outbox) ? readdirSync(outbox).filter((f) => f.startsWith(`${code}-receipt-`) && f.endsWith('.eml')) : []);
    expect(receiptsOf(invoice.code)).toEqual([]);

    // Pays it from anvil account 0.
    const pay = await runToEnd('pay', [reference]);
    const paidTx = /^transaction (0x[0-9a-f]{64}) in block \d+/m.exec(pay.stdout());
    expect(paidTx, pay.output()).not.toBeNull();
    await waitUntil(async () => (await api<Invoice>(`/v1/invoices/${invoice.id}`)).status === 'paid', 60_000, 250);
    await waitUntil(async () => receiptsOf(invoice.code).length === 1, 60_000, 250);
    // The receipt names its transaction.
    expect(readFileSync(path.join(outbox, receiptsOf(invoice.code)[0]), 'utf8').replace(/=\r?\n/g, '')).toContain(paidTx![1]);

    // Subscribes to the 30-second plan from anvil account 0.
    const subscribe = await runToEnd('subscribe', [linkId]);
    const subscribedAt = Date.now();
    expect(subscribe.stdout()).toMatch(new RegExp(`Subscribed to payment link ${linkId} from 0x[0-9a-fA-F]{40}: 2 USDC every 30 s`));
    expect(subscribe.stdout()).toMatch(/^transaction 0x[0-9a-f]{64} in block \d+$/m);

    interface Subscription {
      id: string;
      status: string;
    }
    let subscription: Subscription | undefined;
    let periods: Invoice[] = [];
    await waitUntil(
      async () => {
        const subs = await api<Subscription[]>(`/v1/subscriptions?customer_email=${encodeURIComponent(DEFAULT_SUBSCRIBER_EMAIL)}`);
        if (subs.length === 0) return false;
        expect(subs).toHaveLength(1);
        subscription = subs[0];
        periods = await api<Invoice[]>(`/v1/subscriptions/${subscription.id}/invoices?limit=100`);
        const paid = periods.filter((p) => p.status === 'paid');
        return paid.length >= 2 && paid.every((p) => receiptsOf(p.code).length === 1);
      },
      TWO_RECEIPTS_AFTER_SUBSCRIBE_MS,
      250,
    ).catch((err: unknown) => {
      const files = existsSync(outbox) ? readdirSync(outbox) : [];
      throw new Error(`${(err as Error).message}: subscription ${JSON.stringify(subscription)}, periods ${JSON.stringify(periods)}, outbox ${JSON.stringify(files)}\n${start.output().slice(-6000)}`);
    });
    const elapsed = Date.now() - subscribedAt;
    const paidPeriods = periods.filter((p) => p.status === 'paid');
    expect(new Set(paidPeriods.map((p) => p.id)).size).toBe(paidPeriods.length);
    expect(subscription!.status).toBe('active');
    // Two receipts of two distinct invoices of that one subscription (and none of anything else's).
    const receiptFiles = readdirSync(outbox).filter((f) => /-receipt-/.test(f));
    for (const p of paidPeriods.slice(0, 2)) expect(receiptFiles.filter((f) => f.startsWith(`${p.code}-receipt-`))).toHaveLength(1);
    process.stdout.write(`readme-local-chain: two subscription receipts ${Math.round(elapsed / 1000)} s after npm run subscribe exited\n`);

    // What runs on this test's folders (anvil's --state among them): the check below can see them.
    const onOurFolders = () =>
      readdirSync('/proc')
        .flatMap((e) => {
          const p = /^\d+$/.test(e) ? procOf(Number(e)) : null;
          return p !== null && alive(p) ? [commandOf(p)] : [];
        })
        .filter((c) => c.includes(dir));
    expect(onOurFolders().some((c) => c.includes('anvil'))).toBe(true);

    // Ctrl-C in terminals 2 and 1: the service drains and stops its PostgreSQL, the chain saves its state.
    await stop(start);
    expect(start.output()).toContain('embedded PostgreSQL stopped');
    expect(existsSync(path.join(dir, 'pg', 'server.json'))).toBe(false);
    expect(await acceptsConnections(apiPort)).toBe(false);
    await stop(chain);
    expect(await acceptsConnections(chainPort)).toBe(false);
    // Nothing anywhere still runs on this test's folders, whoever started it: a process the
    // one-shot commands left behind would be reparented, not below npm.
    expect(onOurFolders()).toEqual([]);
  }, 300_000);
});
