// One run of the payment detector on one chain (the `chain.watch` job, made by a job scheduler per
// watched chain). It reads from the cursor up to the safe head (head - confirmations) in
// eth_getLogs ranges of at most CHAIN_GETLOGS_MAX_BLOCKS (a run's first a sixteenth of it), halved
// when the provider refuses a range or answers more than it may (down to one block, then one
// address at a time) and doubled back on success, records what they hold (detector.ts; each range
// is read from the node while the one before it is written), then records the logs between the safe
// head and the head as pending. What it believes of the node (docs/payments.md, "What a node can
// and cannot do"): every RPC URL must answer the chain's id; a head counts only when its block can
// be fetched; a confirmed log counts only inside the blocks asked for and in a block the node has,
// same hash; a head behind the cursor is a node that lags (the run waits) unless the block hashes
// say the chain changed, and then the cursor goes back to the fork point found by hash (to the
// start only for a chain started over, told by its block 0); a pending payment whose block is still
// there is never announced removed; a cursor moves only for workers scanning for the same set. An
// RPC failure (outage, rate limit) backs off and ends the run quietly; anything else fails it (an
// answer that cannot be a chain's also makes the next run lead with the chain's next RPC URL).
import { safeHead } from '../domain/payments.js';
import { compareScannedFor, describeScannedForDifference, isWatched, scannedForOf, type Chain } from '../domain/chains.js';
import type { Logger } from '../log.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { findCursor, forgetHead, lockCursor, pendingPaymentsBetween, recipientsToRescan, setCursorIdentity, watchedAddresses } from '../db/payments.js';
import type { ChainMetrics } from '../observability/metrics.js';
import { recordRange, rewindCursor } from './detector.js';
import { fetchLogs, InconsistentLogsError, observePayments, observeRecords, type ObservedPayment, type ObservedRecord } from './observe.js';
import { VotersDisagreeError } from './inconsistent-answer.js';
import { chainIdAt, classifyRpcError, createChainRpc, redactRpcUrl, type BlockHeader, type ChainRpc, type RpcOutcome } from './rpc.js';
import { firstLine } from '../lib/first-line.js';

export interface ChainWatcherOptions {
  pool: Pool;
  chains: readonly Chain[];
  maxBlocks: number;
  log: Logger;
  metrics?: ChainMetrics;
  /** Confirmed ranges one run scans at most before it lets the next run go on. */
  rangesPerRun?: number;
  /** How many of a chain's URLs must agree on a range's logs and headers (CHAIN_RPC_QUORUM; default 1). */
  rpcQuorum?: number;
}

export interface ChainWatcher {
  /** One scan of the chain; returns a short outcome for the job log. Throws on a failure that is not the RPC's (a bug). */
  run(chainId: number): Promise<string>;
}

interface ChainState {
  /** Over the URLs that answered the chain's id; null until checked (at start, and again after an outage). */
  rpc: ChainRpc | null;
  /** URLs that answered another chain's id: never used by this worker. */
  wrongChain: Set<string>;
  range: number;
  failures: number;
  retryAt: number;
  /** The time of the cursor's block as last known: the lag keeps growing while the provider is down. */
  cursorTime: Date | null;
  /** The last verified safe head and the cursor as last read: the lag in blocks while the cursor does not move. */
  safe: bigint | null;
  cursor: bigint | null;
  /** A warning is logged once per streak of these (a lagging node, an unverified head, a refused set). */
  quietCause: string | null;
  /** The kind of the current RPC failure streak: a new kind (a rate limit turning into an outage) is warned of again. */
  failureCause: string | null;
  /** Which of the URLs that answered the chain's id leads (the others are its fallbacks): the next one after an answer that cannot be a chain's. */
  lead: number;
  /** Runs in a row failed by an answer that cannot be the chain's (a forged or mangled log). */
  lies: number;
}

/** A pending payment row as stillOnChain checks it (read once per run, from the cursor up). */
type PendingRow = Awaited<ReturnType<typeof pendingPaymentsBetween>>[number];

/** Recent [block, hash] pairs kept on the cursor to find where a deep reorg forked. */
const CHECKPOINTS = 32;
/**
 * A run's first confirmed range is at most this fraction of CHAIN_GETLOGS_MAX_BLOCKS, doubled after
 * each answer (and never more than the range the provider was last found to take): on a backlog
 * the read ahead starts overlapping the writes after a short first read, and a fresh worker's first
 * read is not the largest one, which a provider may refuse and which is then thrown away.
 */
const SLOW_START = 16;
const MAX_BACKOFF_MS = 60_000;
/** The wait after the nth failed round in a row (an outage, or every URL lying): 1 s doubling, at most MAX_BACKOFF_MS. */
const backoffMs = (n: number) => Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** Math.min(n - 1, 10));

/** Two block hashes are the same whatever their letter case (a node's, or one recorded before hashes were kept in lower case). */
const sameHash = (a: string | null | undefined, b: string | null | undefined) => a != null && b != null && a.toLowerCase() === b.toLowerCase();

/** A run that ends without scanning, on purpose: the node cannot be believed now, or the cursor is not this worker's. */
class Wait {
  constructor(
    readonly cause: 'lagging_node' | 'unverified_head' | 'wrong_chain_id' | 'watched_set' | 'no_quorum',
    readonly outcome: string,
    readonly fields: Record<string, unknown>,
    readonly level: 'warn' | 'error' = 'warn',
  ) {}
}

export function createChainWatcher(opts: ChainWatcherOptions): ChainWatcher {
  const states = new Map<number, ChainState>();
  const rangesPerRun = opts.rangesPerRun ?? 50;

  function stateOf(chain: Chain): ChainState {
    let s = states.get(chain.chainId);
    if (!s) {
      s = { rpc: null, wrongChain: new Set(), range: opts.maxBlocks, failures: 0, retryAt: 0, cursorTime: null, safe: null, cursor: null, quietCause: null, failureCause: null, lead: 0, lies: 0 };
      states.set(chain.chainId, s);
    }
    return s;
  }

  /**
   * The chain's RPC over the URLs that answer its chain id. A URL answering another id is an
   * error naming it (redacted) and both ids, once, and is never used; one that does not answer is
   * asked again the next time (after an outage the watcher checks every URL again).
   */
  async function rpcOf(chain: Chain, s: ChainState): Promise<ChainRpc> {
    if (s.rpc) return s.rpc;
    const id = String(chain.chainId);
    const candidates = chain.rpcUrls.filter((u) => !s.wrongChain.has(u));
    const counted = (method: string, outcome: RpcOutcome) => opts.metrics?.rpcCalls.inc({ chain_id: id, method, outcome });
    const answers = await Promise.allSettled(candidates.map((u) => chainIdAt(u, counted)));
    const good: string[] = [];
    let unreachable: unknown = null;
    answers.forEach((a, i) => {
      const url = candidates[i];
      if (a.status === 'rejected') {
        unreachable ??= a.reason;
      } else if (a.value !== chain.chainId) {
        s.wrongChain.add(url);
        opts.metrics?.scanFailures.inc({ chain_id: id, cause: 'wrong_chain_id' });
        opts.log.error(
          { chain_id: chain.chainId, rpc_url: redactRpcUrl(url), answered_chain_id: a.value },
          `RPC URL ${redactRpcUrl(url)} answers chain id ${a.value}, not ${chain.chainId}: it is never used for chain ${chain.chainId}`,
        );
      } else {
        good.push(url);
      }
    });
    if (good.length === 0) {
      if (unreachable !== null) throw unreachable;
      throw new Wait('wrong_chain_id', `refused: no RPC URL of chain ${chain.chainId} answers chain id ${chain.chainId}`, {}, 'error');
    }
    const quorum = opts.rpcQuorum ?? 1;
    if (good.length < quorum) {
      // Fewer providers to compare than asked for: no range is believed, so none is scanned.
      if (unreachable !== null) throw unreachable;
      throw new Wait('no_quorum', `refused: ${good.length} of chain ${chain.chainId}'s RPC URLs answer its chain id, CHAIN_RPC_QUORUM is ${quorum}`, {}, 'error');
    }
    const first = s.lead % good.length;
    s.rpc = createChainRpc([...good.slice(first), ...good.slice(0, first)], counted, quorum);
    return s.rpc;
  }

  /** The range's payments, of every kind; a refused or oversized range is halved (down to one block, then a kind's smallest pieces). */
  async function logsOf(chain: Chain, rpc: ChainRpc, s: ChainState, recipients: string[], from: bigint, to: bigint): Promise<{ observed: ObservedPayment[]; records: ObservedRecord[]; to: bigint }> {
    for (let narrow = false; ; ) {
      try {
        const logs = await fetchLogs(rpc, { chain, recipients }, from, to, narrow);
        const observed = observePayments(logs, chain.feeAddress);
        const records = observeRecords(logs);
        // A log outside the blocks asked for (one above the head, say) is no answer to the question.
        const outside = [...observed, ...records].find((l) => l.blockNumber < from || l.blockNumber > to);
        if (outside) throw new InconsistentLogsError(`a log of block ${outside.blockNumber} (transaction ${outside.txHash}) in the answer for blocks ${from}-${to}`);
        return { observed, records, to };
      } catch (err) {
        if (classifyRpcError(err) !== 'range' || narrow) throw err;
        if (to === from) {
          narrow = true;
          opts.log.info({ chain_id: chain.chainId, block: from.toString() }, 'one block refused or over the size limit: reading it one address at a time');
          continue;
        }
        s.range = Math.max(1, Math.floor(Number(to - from + 1n) / 2));
        to = from + BigInt(s.range) - 1n;
        opts.log.info({ chain_id: chain.chainId, blocks: s.range }, 'eth_getLogs range refused or over the size limit: asking for fewer blocks');
      }
    }
  }

  /**
   * Whether the chain has no block of this number. A quorum's voters that disagree on it (one
   * lagging behind a head recorded before) are no evidence either way: the head is kept.
   */
  async function noSuchBlock(rpc: ChainRpc, n: bigint): Promise<boolean> {
    try {
      return (await rpc.blockIfAny(n)) === null;
    } catch (err) {
      if (err instanceof InconsistentLogsError) return false;
      throw err;
    }
  }

  /**
   * The times of the blocks a confirmed range's logs are in, each block fetched from the node: a
   * log whose block the node does not have, or has with another hash, is a forged answer and fails
   * the run (nothing is recorded; the next run asks again). A log's own blockTimestamp is not used:
   * it comes with the same answer.
   */
  async function blockTimes(rpc: ChainRpc, logs: readonly { blockNumber: bigint; blockHash: string; txHash: string }[]): Promise<Map<bigint, Date>> {
    const numbers = [...new Set(logs.map((l) => l.blockNumber))];
    const blocks = new Map(numbers.map((n, i) => [n, i] as const));
    const fetched = await Promise.all(numbers.map((n) => rpc.blockIfAny(n)));
    const times = new Map<bigint, Date>();
    for (const l of logs) {
      const b = fetched[blocks.get(l.blockNumber)!];
      if (b?.hash.toLowerCase() !== l.blockHash.toLowerCase()) {
        throw new InconsistentLogsError(`transaction ${l.txHash}'s log names block ${l.blockNumber} ${l.blockHash}, which the node ${b ? `has as ${b.hash}` : 'does not have'}`);
      }
      times.set(l.blockNumber, new Date(Number(b.timestamp) * 1000));
    }
    return times;
  }

  /** Pending rows of [from, to] not observed whose block the node still has, same hash: not removed. */
  async function stillOnChain(chain: Chain, rpc: ChainRpc, pendingRows: PendingRow[], from: bigint, to: bigint, observed: ObservedPayment[]): Promise<{ txHash: string; txPosition: string }[]> {
    const seen = new Set(observed.map((o) => `${o.txHash}:${o.txPosition}`));
    const missing = pendingRows.filter((p) => BigInt(p.block_number) >= from && BigInt(p.block_number) <= to && !seen.has(`${p.tx_hash}:${p.tx_position}`));
    const kept: { txHash: string; txPosition: string }[] = [];
    for (const p of missing) {
      const b = await rpc.blockIfAny(BigInt(p.block_number));
      if (sameHash(b?.hash, p.block_hash)) {
        opts.log.warn({ chain_id: chain.chainId, tx_hash: p.tx_hash, block: p.block_number }, 'a pending payment is missing from the logs but its block is still on the chain: kept');
        kept.push({ txHash: p.tx_hash, txPosition: p.tx_position });
      }
    }
    return kept;
  }

  /**
   * The head, believed only when the node can hand over its block (a node answering 10^12 has no
   * such block): a lie cannot become the recorded head that confirmations are counted from.
   */
  async function verifiedHead(rpc: ChainRpc): Promise<BlockHeader> {
    const number = await rpc.blockNumber();
    const block = await rpc.blockIfAny(number);
    if (!block || block.number !== number) throw new Wait('unverified_head', `head ${number} not believed: the node has no such block`, { head: number.toString() });
    return block;
  }

  /**
   * Who the cursor belongs to: the same chain (block 0's hash; another one is a chain started
   * over) and the same set (ScannedFor). Adopts an unset identity, and a wider set; refuses another.
   */
  async function claimCursor(chain: Chain, genesisHash: string): Promise<{ restarted: boolean }> {
    const mine = scannedForOf(chain);
    return withTransaction(opts.pool, async (tx) => {
      const cursor = await lockCursor(tx, chain.chainId, BigInt(chain.startBlock) - 1n);
      const scannedFor = cursor.scanned_for;
      if (scannedFor) {
        const verdict = compareScannedFor(scannedFor, mine);
        if (verdict === 'other') {
          const differs = describeScannedForDifference(scannedFor, mine);
          throw new Wait('watched_set', `refused: the cursor of chain ${chain.chainId} was scanned for another set (${differs})`, { differs }, 'error');
        }
        if (verdict === 'wider') opts.log.warn({ chain_id: chain.chainId, scanned_for: mine }, 'this worker watches more (tokens, or the subscription contract) than the cursor was scanned for: it takes the cursor over (earlier blocks are not scanned for them)');
      }
      const restarted = cursor.genesis_hash !== null && !sameHash(cursor.genesis_hash, genesisHash);
      const unchanged = scannedFor !== null && compareScannedFor(scannedFor, mine) === 'same' && sameHash(cursor.genesis_hash, genesisHash);
      // A restarted chain keeps its old identity until its cursor is rewound (the next step).
      if (!restarted && !unchanged) await setCursorIdentity(tx, chain.chainId, { genesisHash, scannedFor: mine });
      return { restarted };
    });
  }

  async function scan(chain: Chain, s: ChainState): Promise<string> {
    const id = String(chain.chainId);
    const rpc = await rpcOf(chain, s);
    const before = await findCursor(opts.pool, chain.chainId);
    // Known before the head is: a run that cannot believe the head still shows the lag.
    if (before) s.cursor = BigInt(before.block_number);
    const [headBlock, genesis] = await Promise.all([verifiedHead(rpc), rpc.block(0n)]);
    const head = headBlock.number;
    const safe = safeHead(head, chain.confirmations);
    s.safe = safe;
    const start = BigInt(chain.startBlock) - 1n;
    // The cursor's identity is written under its lock only when something is new (a first run, a
    // wider set, a restart); recordRange checks the set again under the lock.
    const settled = before?.scanned_for && compareScannedFor(before.scanned_for, scannedForOf(chain)) === 'same' && sameHash(before.genesis_hash, genesis.hash);
    const { restarted } = settled ? { restarted: false } : await claimCursor(chain, genesis.hash);
    const cursor = settled ? before : await findCursor(opts.pool, chain.chainId);
    let cur = cursor ? BigInt(cursor.block_number) : start;
    s.cursor = cur;
    let checkpoints: [string, string][] = cursor?.checkpoints ?? [];
    let rewound = '';

    if (restarted) {
      // Block 0 is another block: a chain started over (`npm run chain -- --fresh`). Everything is scanned again.
      opts.log.warn({ chain_id: chain.chainId, cursor: cur.toString(), head: head.toString() }, 'the chain started over (its block 0 changed): rescanning from the start block');
      if (!(await rewindCursor(opts.pool, chain, cur, { block: start, hash: null, checkpoints: [] }, head))) return 'cursor_moved';
      await claimCursorAfterRestart(chain, genesis.hash);
      cur = start;
      s.cursor = cur;
      checkpoints = [];
      rewound = ' after a restart of the chain';
    } else if (cursor && cur > head) {
      // The node is behind the cursor. It lags, unless the newest checkpoint it has changed hash.
      const known = checkpoints.filter((cp) => BigInt(cp[0]) <= head).at(-1);
      const there = known ? await rpc.blockIfAny(BigInt(known[0])) : null;
      if (!known || sameHash(there?.hash, known[1])) {
        throw new Wait('lagging_node', `node at block ${head}, behind the cursor ${cur}: waiting for it`, { head: head.toString(), cursor: cur.toString() });
      }
      const back = await forkPoint(rpc, checkpoints, BigInt(known[0]) + 1n, start);
      rewound = await rewind(chain, cur, back, checkpoints);
      if (!rewound) return 'cursor_moved';
      checkpoints = checkpoints.filter((cp) => BigInt(cp[0]) <= back.block);
      cur = back.block;
    } else if (cursor?.block_hash && cur >= 0n) {
      const now = await rpc.block(cur);
      if (!sameHash(now.hash, cursor.block_hash)) {
        const back = await forkPoint(rpc, checkpoints, cur, start);
        rewound = await rewind(chain, cur, back, checkpoints);
        if (!rewound) return 'cursor_moved';
        checkpoints = checkpoints.filter((cp) => BigInt(cp[0]) <= back.block);
        cur = back.block;
      }
    }
    s.cursor = cur;

    // A head recorded before that this node has no block for (a lie believed before heads were
    // verified, a chain rolled back) is forgotten: confirmations count from verified heads.
    if (cursor?.head_block && BigInt(cursor.head_block) > head && (await noSuchBlock(rpc, BigInt(cursor.head_block)))) {
      opts.log.warn({ chain_id: chain.chainId, recorded_head: cursor.head_block, head: head.toString() }, 'the recorded head is not on the chain: forgotten');
      await forgetHead(opts.pool, chain.chainId);
    }

    const scannedFor = scannedForOf(chain);
    // Beside the addresses watched now, those of confirmed payments above the cursor (there are
    // some only while a deep reorg is rescanned) and of payments reorged out in the last day: a
    // payment to an address no longer watched (the merchant moved to another) is asked for again,
    // so it is kept, not reorged out for being unasked, and counts again once included again.
    const [watched, rescanned, pendingRows] = await Promise.all([
      watchedAddresses(opts.pool, chain.chainId, chain.environment),
      recipientsToRescan(opts.pool, chain.chainId, cur),
      pendingPaymentsBetween(opts.pool, chain.chainId, cur + 1n, head),
    ]);
    const recipients = [...new Set([...watched, ...rescanned])];
    let confirmed = 0;
    let cursorTime: Date | null = cursor?.block_time ?? null;
    // A confirmed range: its logs and the blocks they need, read from the node. The next range is
    // read while this one is written (its RPC and decoding overlap the transaction), and only
    // ever after this one's read, so a range refused and halved shrinks the next one too.
    // The run's ranges start at a sixteenth of the most (SLOW_START) and double after each answer.
    let runCap = Math.ceil(opts.maxBlocks / SLOW_START);
    const readRange = async (after: bigint) => {
      const size = BigInt(Math.min(s.range, runCap));
      const wanted = after + size > safe ? safe : after + size;
      const { observed, records, to } = await logsOf(chain, rpc, s, recipients, after + 1n, wanted);
      s.range = Math.min(opts.maxBlocks, s.range * 2);
      runCap *= 2;
      const [times, end, kept] = await Promise.all([blockTimes(rpc, [...observed, ...records]), rpc.block(to), stillOnChain(chain, rpc, pendingRows, after + 1n, to, observed)]);
      return { observed, records, to, times, end, kept };
    };
    let next = cur < safe && rangesPerRun > 0 ? readRange(cur) : null;
    try {
      for (let ranges = 0; next && ranges < rangesPerRun; ranges++) {
        const { observed, records, to, times, end, kept } = await next;
        next = to < safe && ranges + 1 < rangesPerRun ? readRange(to) : null;
        // Awaited in the next turn, or let go with the run (finally): never an unhandled rejection.
        next?.catch(() => undefined);
        checkpoints = [...checkpoints, [to.toString(), end.hash] as [string, string]].slice(-CHECKPOINTS);
        cursorTime = new Date(Number(end.timestamp) * 1000);
        const done = await recordRange(opts.pool, chain, {
          from: cur + 1n,
          to,
          final: true,
          observed,
          records,
          blockTimes: times,
          head,
          safe,
          expectedCursor: cur,
          cursorTo: { block: to, hash: end.hash, time: cursorTime, checkpoints },
          scannedFor,
          stillOnChain: kept,
        });
        if (!done) return 'cursor_moved';
        count(id, done.recorded);
        for (const [reason, n] of Object.entries(done.ignored)) if (n > 0) opts.metrics?.ignoredTransfers.inc({ chain_id: id, reason }, n);
        for (const g of done.ignoredLogs) {
          opts.metrics?.ignoredLogs.inc({ chain_id: id, kind: g.kind, reason: g.reason }, g.count);
          opts.log.warn({ chain_id: chain.chainId, kind: g.kind, reason: g.reason, count: g.count }, 'confirmed subscription contract logs that made nothing (terms not a checkout\'s, a reference used again, or an unknown subscription): their tokens count to no invoice');
        }
        for (const r of done.reorgedOut) {
          opts.log.error(
            { chain_id: chain.chainId, payment_id: r.id, account_id: r.accountId, invoice_id: r.invoiceId, tx_hash: r.txHash, block: r.blockNumber, uncounted_atomic: r.uncountedAtomic },
            'a confirmed payment left the chain in a reorg deeper than the confirmations: it counts no more (payment.reorged_out)',
          );
        }
        confirmed += done.recorded.filter((r) => r.status === 'confirmed').length;
        cur = to;
        s.cursor = cur;
      }
    } finally {
      // A run that stops early (the cursor moved, a failure) waits for the read ahead to settle
      // before it returns, so a next run never reads beside it (its calls time out at 15 s).
      await next?.catch(() => undefined);
    }

    let pending = 0;
    let tip = '';
    const window = cur >= safe ? await pendingWindow(chain, rpc, s, recipients, pendingRows, cur, head) : null;
    if (window === 'voters_differ') tip = ', pending not read (the voters differ above the safe head)';
    else if (window) {
      const { observed, kept } = window;
      const done = await recordRange(opts.pool, chain, {
        from: cur + 1n,
        to: head,
        final: false,
        observed,
        blockTimes: new Map(),
        head,
        safe,
        expectedCursor: cur,
        scannedFor,
        stillOnChain: kept,
      });
      if (!done) return 'cursor_moved';
      count(id, done.recorded);
      pending = observed.length;
    }

    opts.metrics?.headBlock.set({ chain_id: id }, Number(head));
    opts.metrics?.safeBlock.set({ chain_id: id }, Number(safe));
    opts.metrics?.cursorBlock.set({ chain_id: id }, Number(cur));
    s.cursorTime = cursorTime;
    showLag(chain, s);
    const behind = safe > cur ? `, ${safe - cur} blocks still to scan` : '';
    return `scanned to ${cur} (head ${head})${rewound}: ${confirmed} confirmed, ${pending} pending${behind}${tip}`;
  }

  /**
   * The window above the safe head, in ranges the provider accepts, up to this run's head: what it
   * holds is pending; a pending row no longer there (up to that head) is to be removed. With a
   * quorum, voters that differ there (honest ones do at the tip: a one-block fork, an index
   * behind its head) leave the pending rows as they are this run rather than fail it: they show
   * no money counted, and the same blocks are voted on again as confirmed ranges, where a
   * difference fails the run.
   */
  async function pendingWindow(
    chain: Chain,
    rpc: ChainRpc,
    s: ChainState,
    recipients: string[],
    pendingRows: PendingRow[],
    cur: bigint,
    head: bigint,
  ): Promise<{ observed: ObservedPayment[]; kept: { txHash: string; txPosition: string }[] } | 'voters_differ'> {
    try {
      const observed: ObservedPayment[] = [];
      for (let from = cur + 1n; from <= head; ) {
        const wanted = from + BigInt(s.range) - 1n > head ? head : from + BigInt(s.range) - 1n;
        const got = await logsOf(chain, rpc, s, recipients, from, wanted);
        observed.push(...got.observed);
        from = got.to + 1n;
      }
      return { observed, kept: await stillOnChain(chain, rpc, pendingRows, cur + 1n, head, observed) };
    } catch (err) {
      if (!(err instanceof VotersDisagreeError)) throw err;
      opts.log.info({ chain_id: chain.chainId, from: (cur + 1n).toString(), head: head.toString(), reason: err.message }, 'the RPC voters differ above the safe head: pending payments are read again next run');
      return 'voters_differ';
    }
  }

  async function claimCursorAfterRestart(chain: Chain, genesisHash: string): Promise<void> {
    await withTransaction(opts.pool, async (tx) => {
      await lockCursor(tx, chain.chainId, BigInt(chain.startBlock) - 1n);
      await setCursorIdentity(tx, chain.chainId, { genesisHash, scannedFor: scannedForOf(chain) });
    });
  }

  /**
   * Where a reorg forked: the newest checkpoint below `below` whose block still has its hash.
   * The start block only when none does (a reorg deeper than every checkpoint).
   */
  async function forkPoint(rpc: ChainRpc, checkpoints: [string, string][], below: bigint, start: bigint): Promise<{ block: bigint; hash: string | null }> {
    for (const cp of [...checkpoints].reverse()) {
      if (BigInt(cp[0]) >= below) continue;
      if (sameHash((await rpc.blockIfAny(BigInt(cp[0])))?.hash, cp[1])) return { block: BigInt(cp[0]), hash: cp[1] };
    }
    return { block: start, hash: null };
  }

  /** Moves the cursor back to the fork point; '' when another worker moved it first. */
  async function rewind(chain: Chain, cur: bigint, back: { block: bigint; hash: string | null }, checkpoints: [string, string][]): Promise<string> {
    opts.log.warn({ chain_id: chain.chainId, cursor: cur.toString(), rewound_to: back.block.toString() }, 'reorg under the cursor: rewinding to the fork point and rescanning');
    const kept = checkpoints.filter((cp) => BigInt(cp[0]) <= back.block);
    if (!(await rewindCursor(opts.pool, chain, cur, { block: back.block, hash: back.hash, checkpoints: kept }))) return '';
    return ` after a reorg (rewound to ${back.block})`;
  }

  /** chain_lag_blocks from the last verified safe head and the cursor: it grows while the cursor does not move, a failing run included. */
  function showLag(chain: Chain, s: ChainState): void {
    const id = String(chain.chainId);
    if (s.safe !== null && s.cursor !== null) opts.metrics?.lagBlocks.set({ chain_id: id }, Math.max(0, Number(s.safe - s.cursor)));
    if (s.cursorTime) opts.metrics?.lagSeconds.set({ chain_id: id }, Math.max(0, (Date.now() - s.cursorTime.getTime()) / 1000));
  }

  function count(chainId: string, recorded: { kind: string; status: string }[]): void {
    for (const r of recorded) opts.metrics?.payments.inc({ chain_id: chainId, kind: r.kind, status: r.status });
  }

  return {
    async run(chainId) {
      const chain = opts.chains.find((c) => c.chainId === chainId);
      if (!chain || !isWatched(chain)) return 'not watched';
      const s = stateOf(chain);
      const id = String(chainId);
      if (Date.now() < s.retryAt) {
        showLag(chain, s);
        return 'backing off after RPC errors';
      }
      try {
        const outcome = await scan(chain, s);
        if (s.failures > 0) opts.log.info({ chain_id: chainId, failures: s.failures }, 'chain RPC answers again');
        if (s.quietCause !== null) opts.log.info({ chain_id: chainId, was: s.quietCause }, 'chain scan goes on');
        s.failures = 0;
        s.lies = 0;
        s.failureCause = null;
        s.quietCause = null;
        return outcome;
      } catch (err) {
        await refreshCursor(chain, s);
        showLag(chain, s);
        if (err instanceof Wait) {
          opts.metrics?.scanFailures.inc({ chain_id: id, cause: err.cause });
          // One line per streak: a node lagging for minutes does not flood the log.
          if (s.quietCause !== err.cause) opts.log[err.level]({ chain_id: chainId, ...err.fields }, err.outcome);
          s.quietCause = err.cause;
          return err.outcome;
        }
        if (err instanceof InconsistentLogsError) {
          // A forged or mangled answer: the next run leads with the next URL (its chain id checked
          // again), so one lying provider does not stop the scan while another tells the truth.
          // Once every URL has answered so in this streak, the runs back off as in an outage rather
          // than ask the liars again at every tick. The run still fails: a lying node is an incident.
          s.lead++;
          s.rpc = null;
          s.lies++;
          const urls = Math.max(1, chain.rpcUrls.filter((u) => !s.wrongChain.has(u)).length);
          const rounds = Math.floor(s.lies / urls);
          const waitMs = rounds === 0 ? 0 : backoffMs(rounds);
          s.retryAt = Date.now() + waitMs;
          opts.metrics?.scanFailures.inc({ chain_id: id, cause: 'inconsistent_logs' });
          opts.log.error({ chain_id: chainId, err, retry_in_ms: waitMs }, "chain RPC answered logs that cannot be the chain's; the next run leads with the next URL");
          throw err;
        }
        const failure = classifyRpcError(err);
        if (failure === null) {
          // Not the RPC's doing (a database error, a broken invariant): the run fails loudly, and
          // the next tick of the job scheduler is its retry.
          opts.metrics?.scanFailures.inc({ chain_id: id, cause: 'bug' });
          opts.log.error({ chain_id: chainId, err }, 'chain scan failed');
          throw err;
        }
        opts.metrics?.scanFailures.inc({ chain_id: id, cause: failure });
        s.failures++;
        // After an outage every URL's chain id is checked again before it is used (a URL may now lead elsewhere).
        s.rpc = null;
        // A quorum asks each voter alone (no fallback): the next run's voters start one URL further,
        // so one failing provider does not hold the scan while enough others answer.
        if ((opts.rpcQuorum ?? 1) > 1) s.lead++;
        const waitMs = backoffMs(s.failures);
        s.retryAt = Date.now() + waitMs;
        // One warning per outage, with the error itself (its class, message, cause and stack).
        if (s.failureCause !== failure) opts.log.warn({ chain_id: chainId, cause: failure, retry_in_ms: waitMs, err }, 'chain RPC failing; backing off');
        s.failureCause = failure;
        return `scan failed (${failure}: ${firstLine(err).slice(0, 120)}), retry in ${waitMs} ms`;
      }
    },
  };

  /** The cursor as the database has it now, for the lag of a run that did not finish. */
  async function refreshCursor(chain: Chain, s: ChainState): Promise<void> {
    try {
      const c = await findCursor(opts.pool, chain.chainId);
      if (c) s.cursor = BigInt(c.block_number);
    } catch {
      // The database is what failed: the lag keeps its last value.
    }
  }
}

