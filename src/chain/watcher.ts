// One run of the payment detector on one chain (the `chain.watch` job, made by a job scheduler per
// watched chain). It reads from the cursor up to the safe head (head - confirmations) in
// eth_getLogs ranges of at most CHAIN_GETLOGS_MAX_BLOCKS, halved on a provider's refusal and
// doubled back on success, records what they hold (detector.ts), then records the logs between
// the safe head and the head as pending. Before scanning it checks the chain under the cursor: a
// block hash that changed (a reorg deeper than the pending window) or a head behind the cursor (a
// chain started over) rewinds it. An RPC error backs off and ends the run quietly: a down
// provider never fails a job, stalls another queue or touches the worker's readiness.
import { safeHead } from '../domain/payments.js';
import { isWatched, type Chain } from '../domain/chains.js';
import type { Logger } from '../log.js';
import type { Pool } from '../db/pool.js';
import { findCursor, watchedAddresses } from '../db/payments.js';
import type { ChainMetrics } from '../observability/metrics.js';
import { recordRange, rewindCursor } from './detector.js';
import { observePayments, type ObservedPayment } from './observe.js';
import { createChainRpc, isRangeRefusal, type ChainRpc } from './rpc.js';

export interface ChainWatcherOptions {
  pool: Pool;
  chains: readonly Chain[];
  maxBlocks: number;
  log: Logger;
  metrics?: ChainMetrics;
  /** Confirmed ranges one run scans at most before it lets the next run go on. */
  rangesPerRun?: number;
}

export interface ChainWatcher {
  /** One scan of the chain; returns a short outcome for the job log. */
  run(chainId: number): Promise<string>;
}

interface ChainState {
  rpc: ChainRpc;
  range: number;
  failures: number;
  retryAt: number;
  /** The time of the cursor's block as last known: the lag keeps growing while the provider is down. */
  cursorTime: Date | null;
}

/** Recent [block, hash] pairs kept on the cursor to find where a deep reorg forked. */
const CHECKPOINTS = 32;
const MAX_BACKOFF_MS = 60_000;

export function createChainWatcher(opts: ChainWatcherOptions): ChainWatcher {
  const states = new Map<number, ChainState>();
  const rangesPerRun = opts.rangesPerRun ?? 50;

  function stateOf(chain: Chain): ChainState {
    let s = states.get(chain.chainId);
    if (!s) {
      const id = String(chain.chainId);
      s = {
        rpc: createChainRpc(chain, (method, outcome) => opts.metrics?.rpcCalls.inc({ chain_id: id, method, outcome })),
        range: opts.maxBlocks,
        failures: 0,
        retryAt: 0,
        cursorTime: null,
      };
      states.set(chain.chainId, s);
    }
    return s;
  }

  /** The range's payments; a refused range is halved (down to one block) and asked again. */
  async function logsOf(chain: Chain, s: ChainState, recipients: string[], from: bigint, to: bigint): Promise<{ observed: ObservedPayment[]; to: bigint }> {
    for (;;) {
      try {
        const [proxy, transfers] = await Promise.all([
          chain.feeProxy ? s.rpc.proxyLogs(chain.feeProxy, from, to) : Promise.resolve([]),
          recipients.length > 0 && chain.tokens.length > 0
            ? // The fee address too: a proxy payment's fee counts only when its Transfer went there.
              s.rpc.transferLogs(chain.tokens.map((t) => t.address), chain.feeAddress ? [...recipients, chain.feeAddress.toLowerCase()] : recipients, from, to)
            : Promise.resolve([]),
        ]);
        // A proxy event names any token its caller likes: only the chain's own tokens are payments.
        const tokens = new Set(chain.tokens.map((t) => t.address.toLowerCase()));
        return { observed: observePayments(proxy.filter((p) => tokens.has(p.tokenAddress.toLowerCase())), transfers, chain.feeAddress), to };
      } catch (err) {
        if (!isRangeRefusal(err) || to === from) throw err;
        s.range = Math.max(1, Math.floor(Number(to - from + 1n) / 2));
        to = from + BigInt(s.range) - 1n;
        opts.log.info({ chain_id: chain.chainId, blocks: s.range }, 'eth_getLogs range refused by the provider: asking for fewer blocks');
      }
    }
  }

  async function blockTimes(s: ChainState, observed: ObservedPayment[]): Promise<Map<bigint, Date>> {
    const times = new Map<bigint, Date>();
    const missing = new Set<bigint>();
    for (const o of observed) {
      if (o.blockTimestamp !== null) times.set(o.blockNumber, new Date(Number(o.blockTimestamp) * 1000));
      else missing.add(o.blockNumber);
    }
    const blocks = await Promise.all([...missing].map((n) => s.rpc.block(n)));
    for (const b of blocks) times.set(b.number, new Date(Number(b.timestamp) * 1000));
    return times;
  }

  async function scan(chain: Chain, s: ChainState): Promise<string> {
    const id = String(chain.chainId);
    const head = await s.rpc.blockNumber();
    const safe = safeHead(head, chain.confirmations);
    const start = BigInt(chain.startBlock) - 1n;
    const cursor = await findCursor(opts.pool, chain.chainId);
    let cur = cursor ? BigInt(cursor.block_number) : start;
    let checkpoints: [string, string][] = cursor?.checkpoints ?? [];
    let rewound = '';

    if (cursor && cur > head) {
      // The chain is behind the cursor: a local chain started over (`npm run chain -- --fresh`).
      opts.log.warn({ chain_id: chain.chainId, cursor: cur.toString(), head: head.toString() }, 'chain head is behind the cursor: rescanning from the start block');
      if (!(await rewindCursor(opts.pool, chain, cur, { block: start, hash: null, checkpoints: [] }, head))) return 'cursor_moved';
      cur = start;
      checkpoints = [];
      rewound = ' after a restart of the chain';
    } else if (cursor?.block_hash && cur >= 0n) {
      const now = await s.rpc.block(cur);
      if (now.hash !== cursor.block_hash) {
        let fork: [string, string] | null = null;
        for (const cp of [...checkpoints].reverse()) {
          if (BigInt(cp[0]) >= cur) continue;
          if ((await s.rpc.block(BigInt(cp[0]))).hash === cp[1]) {
            fork = cp;
            break;
          }
        }
        const back = fork ? BigInt(fork[0]) : start;
        opts.log.warn({ chain_id: chain.chainId, cursor: cur.toString(), rewound_to: back.toString() }, 'reorg under the cursor: rewinding and rescanning');
        checkpoints = checkpoints.filter((cp) => BigInt(cp[0]) <= back);
        if (!(await rewindCursor(opts.pool, chain, cur, { block: back, hash: fork ? fork[1] : null, checkpoints }))) return 'cursor_moved';
        cur = back;
        rewound = ` after a reorg (rewound to ${back})`;
      }
    }

    const recipients = await watchedAddresses(opts.pool, chain.chainId, chain.environment);
    let confirmed = 0;
    let cursorTime: Date | null = cursor?.block_time ?? null;
    for (let ranges = 0; cur < safe && ranges < rangesPerRun; ranges++) {
      const wanted = cur + BigInt(s.range) > safe ? safe : cur + BigInt(s.range);
      const { observed, to } = await logsOf(chain, s, recipients, cur + 1n, wanted);
      const [times, end] = await Promise.all([blockTimes(s, observed), s.rpc.block(to)]);
      checkpoints = [...checkpoints, [to.toString(), end.hash] as [string, string]].slice(-CHECKPOINTS);
      cursorTime = new Date(Number(end.timestamp) * 1000);
      const done = await recordRange(opts.pool, chain, {
        from: cur + 1n,
        to,
        final: true,
        observed,
        blockTimes: times,
        head,
        safe,
        expectedCursor: cur,
        cursorTo: { block: to, hash: end.hash, time: cursorTime, checkpoints },
      });
      if (!done) return 'cursor_moved';
      count(id, done.recorded);
      for (const [reason, n] of Object.entries(done.ignored)) if (n > 0) opts.metrics?.ignoredTransfers.inc({ chain_id: id, reason }, n);
      for (const r of done.reorgedOut) {
        opts.log.error(
          { chain_id: chain.chainId, payment_id: r.id, account_id: r.accountId, invoice_id: r.invoiceId, tx_hash: r.txHash, block: r.blockNumber, uncounted_atomic: r.uncountedAtomic },
          'a confirmed payment left the chain in a reorg deeper than the confirmations: it counts no more (payment.reorged_out)',
        );
      }
      confirmed += done.recorded.filter((r) => r.status === 'confirmed').length;
      cur = to;
      s.range = Math.min(opts.maxBlocks, s.range * 2);
    }

    let pending = 0;
    if (cur >= safe) {
      // The window above the safe head, in ranges the provider accepts, up to this run's head:
      // what it holds is pending; a pending row no longer there (up to that head) is removed.
      const observed: ObservedPayment[] = [];
      for (let from = cur + 1n; from <= head; ) {
        const wanted = from + BigInt(s.range) - 1n > head ? head : from + BigInt(s.range) - 1n;
        const got = await logsOf(chain, s, recipients, from, wanted);
        observed.push(...got.observed);
        from = got.to + 1n;
      }
      const done = await recordRange(opts.pool, chain, { from: cur + 1n, to: head, final: false, observed, blockTimes: new Map(), head, safe, expectedCursor: cur });
      if (!done) return 'cursor_moved';
      count(id, done.recorded);
      pending = observed.length;
    }

    opts.metrics?.headBlock.set({ chain_id: id }, Number(head));
    opts.metrics?.safeBlock.set({ chain_id: id }, Number(safe));
    opts.metrics?.cursorBlock.set({ chain_id: id }, Number(cur));
    opts.metrics?.lagBlocks.set({ chain_id: id }, Math.max(0, Number(safe - cur)));
    s.cursorTime = cursorTime;
    showLag(chain, s);
    const behind = safe > cur ? `, ${safe - cur} blocks still to scan` : '';
    return `scanned to ${cur} (head ${head})${rewound}: ${confirmed} confirmed, ${pending} pending${behind}`;
  }

  function showLag(chain: Chain, s: ChainState): void {
    if (s.cursorTime) opts.metrics?.lagSeconds.set({ chain_id: String(chain.chainId) }, Math.max(0, (Date.now() - s.cursorTime.getTime()) / 1000));
  }

  function count(chainId: string, recorded: { kind: string; status: string }[]): void {
    for (const r of recorded) opts.metrics?.payments.inc({ chain_id: chainId, kind: r.kind, status: r.status });
  }

  return {
    async run(chainId) {
      const chain = opts.chains.find((c) => c.chainId === chainId);
      if (!chain || !isWatched(chain)) return 'not watched';
      const s = stateOf(chain);
      if (Date.now() < s.retryAt) {
        showLag(chain, s);
        return 'backing off after RPC errors';
      }
      try {
        const outcome = await scan(chain, s);
        if (s.failures > 0) opts.log.info({ chain_id: chainId, failures: s.failures }, 'chain RPC answers again');
        s.failures = 0;
        return outcome;
      } catch (err) {
        s.failures++;
        showLag(chain, s);
        const waitMs = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(s.failures, 10));
        s.retryAt = Date.now() + waitMs;
        // One warning per streak, then every tenth: a long outage does not flood the log.
        if (s.failures === 1 || s.failures % 10 === 0) {
          opts.log.warn({ chain_id: chainId, failures: s.failures, retry_in_ms: waitMs, err: { message: (err as Error).message.split('\n')[0] } }, 'chain scan failed; backing off');
        }
        return `scan failed (${(err as Error).message.split('\n')[0].slice(0, 120)}), retry in ${waitMs} ms`;
      }
    },
  };
}
