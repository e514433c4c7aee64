// The relayer: the service's signer of SubscriptionManager charges and cancels (docs/subscriptions.md,
// "The relayer"). It never holds customer funds: its key is only the subscriptions' operator, and
// it pays the gas. One nonce sequence per chain and key, across processes: a sender takes the
// sequence lock (src/db/relayer-transactions.ts), settles what is in flight, signs, records the
// signed transaction, and only then broadcasts it. So a crash at any moment is safe: a recorded
// transaction is broadcast again (never re-signed with a new nonce), and should both a transaction
// and a second try of the same charge reach the chain, the contract refuses the second charge of a
// period. A transaction not mined RELAYER_STUCK_BLOCKS after it was signed is replaced, same nonce,
// fees at least 25% higher.
import {
  BaseError,
  ContractFunctionRevertedError,
  createPublicClient,
  decodeErrorResult,
  encodeFunctionData,
  fallback,
  formatEther,
  formatUnits,
  getAddress,
  http,
  HttpRequestError,
  LimitExceededRpcError,
  keccak256,
  parseAbi,
  parseEther,
  parseTransaction,
  SocketClosedError,
  TimeoutError,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  webSocket,
  WebSocketRequestError,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
} from 'viem';
import { setTimeout as sleep } from 'node:timers/promises';
import pMap from 'p-map';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Chain } from '../domain/chains.js';
import type { Pool, PoolClient } from '../db/pool.js';
import {
  closeUnsent,
  countBroadcast,
  countBroadcasts,
  insertRelayerTransaction,
  insertRelayerTransactions,
  liveTransactionsFor,
  nextRecordedNonce,
  openRelayerTransactions,
  reopenRelayerTransaction,
  setRelayerStatus,
  setRelayerStatuses,
  settledRelayerTransactions,
  withSequenceLock,
  type NewRelayerTransaction,
  type RelayerPurpose,
  type RelayerTransactionRow,
} from '../db/relayer-transactions.js';
import type { Logger } from '../log.js';
import type { RelayerMetrics } from '../observability/metrics.js';
import { classifyRpcError } from './rpc.js';
import type { RelayerKey } from './relayer-keys.js';
import { SUBSCRIPTION_MANAGER_ABI } from './subscription-manager-abi.js';

const ERC20_READ_ABI = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function decimals() view returns (uint8)',
  'function symbol() view returns (string)',
]);

const TIMEOUT_MS = 15_000;
/** A replacement's fees: at least the old ones + 25% (nodes ask for +10% at least, some more). */
const BUMP_PERCENT = 125n;
/** Sends taken from the queue at once (their node reads made together), and how long one hold of the sequence lock may last. */
const ROUND_MAX = 256;
const HOLD_MAX_MS = 2_000;
/** Calls to the node in flight at once when a settle looks up the open transactions. */
const LOOKUPS_IN_FLIGHT = 100;
/** The most gas a charge or a cancel may be signed with (they need under 100,000). */
const MAX_GAS = 2_000_000n;
/** A filler's gas: a plain transfer of nothing to the relayer itself. */
const FILLER_GAS = 21_000n;
/** A transaction the node took fewer than this many blocks ago is not asked about by a settle. */
const RECENT_BLOCKS = 2n;
/** JSON-RPC requests per HTTP batch at most. */
const RPC_BATCH_SIZE = 100;
/**
 * A charge whose period has begun by our clock but not yet by the chain's latest block waits this
 * long at most for a block that says so (the next block, on a live chain), then is simulated again.
 */
const CHAIN_CLOCK_WAIT_MS = 5_000;
/** How often the chain's head is read while charges wait for it to reach their period. */
const CHAIN_CLOCK_POLL_MS = 100;

// ---------------------------------------------------------------------------------------------
// What callers see

export interface ChargeArgs {
  /** The SubscriptionManager. */
  contract: Address;
  onchainId: bigint;
  periodIndex: number;
  /** The period invoice's 8-byte payment reference, `0x` + 16 hex. */
  paymentReference: Hex;
}

export interface CancelArgs {
  contract: Address;
  onchainId: bigint;
}

/** Why a charge would fail, in the customer's terms (the lifecycle counts an attempt for the first four). */
export type ChargeFailureCode =
  | 'insufficient_balance'
  | 'insufficient_allowance'
  | 'subscription_canceled'
  | 'subscription_ended'
  | 'period_not_begun'
  | 'period_already_charged';

export type SimulateChargeResult =
  | {
      ok: true;
      /**
       * The node's gas estimate of the charge (the simulation is an eth_estimateGas): sendCharge
       * takes it as `gas` instead of asking again. Absent: the send estimates it itself.
       */
      gas?: bigint;
    }
  | {
      ok: false;
      code: ChargeFailureCode;
      /** Words a customer understands: what failed and by how much, in token units. */
      message: string;
      /** For insufficient_balance / insufficient_allowance: what is missing, atomic units. */
      shortAtomic?: bigint;
    };

export interface SentTransaction {
  txHash: Hex;
  nonce: number;
}

/** The service's own fault, never the customer's: the RPC is down or rate-limited. Retry later without counting an attempt. */
export class RelayerUnavailable extends Error {
  readonly code = 'relayer_unavailable';
}

/** The relayer cannot pay the gas: the operator's problem (fund its address), never counted against the customer. */
export class RelayerOutOfGas extends Error {
  readonly code = 'relayer_out_of_gas';
  constructor(
    readonly chainId: number,
    readonly address: Address,
    message: string,
  ) {
    super(message);
  }
}

/** No key (or no RPC URL) for that chain: the service cannot charge there. */
export class RelayerNotConfigured extends Error {
  readonly code = 'relayer_not_configured';
}

/**
 * The call would revert for a reason that is not the customer's (an unknown subscription, another
 * operator, a token refusing for its own reasons) or a node refused the transaction: a bug or a
 * setup to fix, reported loudly; `errorName` is the contract's error when decoded.
 */
export class RelayerCallRefused extends Error {
  readonly code = 'relayer_call_refused';
  constructor(
    message: string,
    readonly errorName: string | null,
  ) {
    super(message);
  }
}

export interface Relayer {
  /** The address new subscriptions on that chain name as their operator; null: no relayer there (no key or no RPC URL). */
  operatorAddress(chainId: number): Address | null;
  /** eth_call of the charge from the operator: would it succeed now, and if not, why (RelayerUnavailable when the RPC is down). */
  simulateCharge(chainId: number, args: ChargeArgs): Promise<SimulateChargeResult>;
  /**
   * Signs, records, then broadcasts the charge. Asked again for the same period while its
   * transaction is in flight or mined, returns that transaction (broadcast again if the node lost it).
   * `gas`: the estimate of a simulation made just before (simulateCharge's); unset, the relayer
   * estimates it itself (and a call that would revert is refused, nothing signed).
   */
  sendCharge(chainId: number, args: ChargeArgs & { gas?: bigint }): Promise<SentTransaction>;
  /** As sendCharge, for cancel(onchainId). */
  sendCancel(chainId: number, args: CancelArgs): Promise<SentTransaction>;
  /**
   * One pass over every chain: settles transactions mined or dropped, broadcasts again those the
   * node lost, replaces those stuck, reads the balance (metric, warning when low). A chain whose
   * RPC fails is logged and skipped.
   */
  upkeep(): Promise<void>;
  /** Chains with a sender, and their operator addresses (for the start line). */
  describe(): { chain_id: number; operator: Address; key: string }[];
}

export interface RelayerOptions {
  pool: Pool;
  chains: readonly Chain[];
  keys: readonly RelayerKey[];
  /** RELAYER_STUCK_BLOCKS. */
  stuckBlocks: number;
  /** RELAYER_MIN_BALANCE, in whole native units ("0.01"). */
  minBalance: string;
  log: Logger;
  metrics?: RelayerMetrics;
  /**
   * Runs after a transaction is recorded and before it is broadcast: a throw there stands for a
   * process dying between the two (tests).
   */
  afterRecord?: (tx: SentTransaction) => Promise<void> | void;
}

// ---------------------------------------------------------------------------------------------

interface Sender {
  chain: Chain;
  /** The sequence's calls: settling, a round's reads, broadcasts. */
  client: PublicClient;
  /**
   * Simulations and the reads that explain them, on a transport of their own: batched with the
   * sequence's calls, a round's broadcasts waited for a batch's eth_estimateGas (the node answers
   * a batch when all of it is done).
   */
  reader: PublicClient;
  account: PrivateKeyAccount;
  address: Address;
  source: string;
  low: boolean | null;
  /** Sends waiting for the sequence lock, in the order asked. */
  queue: SendRequest[];
  /** A drain of the queue is running (it takes what is queued meanwhile too). */
  draining: boolean;
  /** The chain's latest block time as last read (unix seconds), when, and the read in flight. */
  clock: { seconds: number; readAt: number; reading: Promise<number> | null };
  /** Why the upkeep is failing (one warning per streak, and per new reason), or null. */
  upkeepFailure: string | null;
}

interface SendRequest {
  purpose: RelayerPurpose;
  subject: string;
  to: Address;
  data: Hex;
  /** The gas a simulation just measured; unset: estimated in the round. */
  gas: bigint | undefined;
  resolve: (sent: SentTransaction) => void;
  reject: (err: unknown) => void;
}

/** How the node took a broadcast (readAnswer). */
type Delivery =
  | { kind: 'sent' }
  | { kind: 'refused'; words: string }
  | { kind: 'out_of_gas'; err: RelayerOutOfGas }
  | { kind: 'not_ours'; words: string }
  | { kind: 'no_answer'; err: RelayerUnavailable };

function transportOf(urls: readonly string[]): Transport {
  // Calls made together (a batch's simulations, a settle's lookups) go as one JSON-RPC batch, as
  // the watcher's do (src/chain/rpc.ts): a burst of charges costs a few HTTP requests, not one each.
  const one = (url: string) =>
    url.startsWith('ws') ? webSocket(url, { retryCount: 0, timeout: TIMEOUT_MS }) : http(url, { retryCount: 0, timeout: TIMEOUT_MS, batch: { batchSize: RPC_BATCH_SIZE, wait: 0 } });
  return urls.length === 1 ? one(urls[0]) : fallback(urls.map(one), { retryCount: 0 });
}

function noAnswer(err: unknown): boolean {
  if (!(err instanceof BaseError)) return false;
  return !!err.walk(
    (e) =>
      e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof SocketClosedError || e instanceof WebSocketRequestError || e instanceof LimitExceededRpcError,
  );
}

/** The revert data a node returned with an error (eth_estimateGas, eth_call), decoded against the manager's ABI. */
function revertNameIn(err: unknown): string | null {
  if (!(err instanceof BaseError)) return null;
  let name: string | null = null;
  err.walk((e) => {
    const data = (e as { data?: unknown }).data;
    const hex = typeof data === 'string' ? data : typeof data === 'object' && data !== null && typeof (data as { data?: unknown }).data === 'string' ? (data as { data: string }).data : null;
    if (hex === null || !/^0x[0-9a-fA-F]{8}/.test(hex)) return false;
    try {
      name = decodeErrorResult({ abi: SUBSCRIPTION_MANAGER_ABI, data: hex as Hex }).errorName;
    } catch {
      return false;
    }
    return true;
  });
  return name;
}

const isRevert = (err: unknown): ContractFunctionRevertedError | null => {
  if (!(err instanceof BaseError)) return null;
  const found = err.walk((e) => e instanceof ContractFunctionRevertedError);
  return found instanceof ContractFunctionRevertedError ? found : null;
};

/** The node's words for a failed call, first line only (never a key: nothing signed is in a message). */
function wordsOf(err: unknown): string {
  if (err instanceof BaseError) return `${err.shortMessage} ${err.details ?? ''}`.trim().split('\n')[0].slice(0, 300);
  return err instanceof Error ? err.message.split('\n')[0].slice(0, 300) : String(err).slice(0, 300);
}

/** An RPC outage or rate limit becomes RelayerUnavailable; anything else goes on as it is. */
function unavailableOr(err: unknown, chainId: number): unknown {
  const failure = classifyRpcError(err);
  if (failure === 'outage' || failure === 'rate_limit') return new RelayerUnavailable(`chain ${chainId} RPC unavailable: ${wordsOf(err)}`);
  return err;
}

/** What any transaction with this calldata costs before it runs: 21,000, plus 4 per zero byte and 16 per other byte. */
function intrinsicGasOf(data: Hex): bigint {
  let gas = 21_000n;
  for (let i = 2; i + 1 < data.length; i += 2) gas += data.slice(i, i + 2) === '00' ? 4n : 16n;
  return gas;
}

const chargeSubject = (a: ChargeArgs) => `charge:${a.contract.toLowerCase()}:${a.onchainId}:${a.periodIndex}`;
const cancelSubject = (a: CancelArgs) => `cancel:${a.contract.toLowerCase()}:${a.onchainId}`;

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const bump = (v: bigint) => (v * BUMP_PERCENT + 99n) / 100n + 1n;

export function createRelayer(opts: RelayerOptions): Relayer {
  const { pool, log } = opts;
  const minBalanceWei = parseEther(opts.minBalance);
  const senders = new Map<number, Sender>();
  for (const k of opts.keys) {
    const chain = opts.chains.find((c) => c.chainId === k.chainId);
    if (!chain || chain.rpcUrls.length === 0) continue;
    const account = privateKeyToAccount(k.key.reveal());
    senders.set(chain.chainId, {
      chain,
      client: createPublicClient({ transport: transportOf(chain.rpcUrls) }) as PublicClient,
      reader: createPublicClient({ transport: transportOf(chain.rpcUrls) }) as PublicClient,
      account,
      address: getAddress(account.address),
      source: k.source,
      low: null,
      queue: [],
      draining: false,
      clock: { seconds: 0, readAt: 0, reading: null },
      upkeepFailure: null,
    });
  }

  const senderOf = (chainId: number): Sender => {
    const s = senders.get(chainId);
    if (!s) throw new RelayerNotConfigured(`no relayer on chain ${chainId}: set RELAYER_PRIVATE_KEY_FILE or RELAYER_PRIVATE_KEY_${chainId}, and an RPC URL`);
    return s;
  };
  const count = (s: Sender, purpose: RelayerPurpose | 'any', outcome: string) =>
    opts.metrics?.transactions.inc({ chain_id: String(s.chain.chainId), purpose, outcome });

  /** Calls the node; an outage or rate limit is RelayerUnavailable. */
  async function rpc<T>(s: Sender, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw unavailableOr(err, s.chain.chainId);
    }
  }

  /** Does the node have the transaction (pooled or mined)? No answer: RelayerUnavailable. */
  async function nodeHas(s: Sender, hash: string): Promise<boolean> {
    return rpc(s, async () => {
      try {
        await s.client.getTransaction({ hash: hash as Hex });
        return true;
      } catch (err) {
        if (err instanceof TransactionNotFoundError) return false;
        throw err;
      }
    });
  }

  /**
   * Hands a recorded transaction to the node again (settle: one it lost, or a replacement).
   * Taken (or already known, or its nonce already used: the next settle says by what) -> true;
   * refused, and the node does not have it -> false (the caller decides); refused for lack of
   * funds -> RelayerOutOfGas; no answer, and the node cannot say it has it -> RelayerUnavailable
   * (the row stays pending and is broadcast again later).
   */
  async function broadcast(s: Sender, db: PoolClient, row: RelayerTransactionRow): Promise<boolean> {
    const [answer] = await Promise.allSettled([s.client.request({ method: 'eth_sendRawTransaction', params: [row.raw_tx as Hex] })]);
    const taken = await readAnswer(s, row, answer, false);
    switch (taken.kind) {
      case 'sent':
        await countBroadcast(db, row.id);
        return true;
      case 'out_of_gas':
      case 'no_answer':
        throw taken.err;
      default:
        return false;
    }
  }

  /**
   * The node's answer to a broadcast of `row`: taken (or already known) -> sent; refused for lack
   * of funds -> out_of_gas; anything else, the node is asked whether it has the transaction (an
   * error is no proof of a refusal: a node, or a load balancer before it, may answer one for a
   * transaction it pooled; taken as refused, its nonce would go to the next send while it lands)
   * -> sent when it has; no answer -> no_answer (it may be on its way); otherwise refused. Its
   * nonce used: a transaction broadcast before is sent (the next settle says by what mined that
   * nonce); a `fresh` one (its first broadcast) the node does not have is not_ours: the nonce went
   * to a transaction the records do not hold (the key used elsewhere), and this one can never be mined.
   */
  async function readAnswer(s: Sender, row: RelayerTransactionRow, answer: PromiseSettledResult<unknown>, fresh: boolean): Promise<Delivery> {
    if (answer.status === 'fulfilled' && typeof answer.value === 'string' && answer.value.toLowerCase() === row.tx_hash.toLowerCase()) return { kind: 'sent' };
    const chainId = s.chain.chainId;
    // Another hash for an answer (a batch's answers out of step): not taken for this one's.
    const failure: unknown = answer.status === 'rejected' ? answer.reason : new Error(`the node answered ${String(answer.value).slice(0, 80)}, not the transaction's hash`);
    const words = wordsOf(failure);
    if (/insufficient funds/i.test(words)) {
      return { kind: 'out_of_gas', err: new RelayerOutOfGas(chainId, s.address, `relayer ${s.address} on chain ${chainId} cannot pay the gas: fund it (${words})`) };
    }
    const nonceUsed = /nonce too low|nonce has already been used/i.test(words);
    if (/already known|already imported|known transaction/i.test(words) || (nonceUsed && !fresh)) return { kind: 'sent' };
    let has: boolean;
    try {
      has = await nodeHas(s, row.tx_hash);
    } catch {
      return { kind: 'no_answer', err: new RelayerUnavailable(`chain ${chainId} RPC unavailable: ${words}`) };
    }
    if (has) {
      if (!nonceUsed && !noAnswer(failure)) {
        log.warn({ chain_id: chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), reason: words }, 'relayer transaction answered with an error, yet the node has it: sent');
      }
      return { kind: 'sent' };
    }
    if (nonceUsed) return { kind: 'not_ours', words };
    if (noAnswer(failure)) return { kind: 'no_answer', err: new RelayerUnavailable(`chain ${chainId} RPC unavailable: ${words}`) };
    log.warn({ chain_id: chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), reason: words }, 'relayer transaction refused by the node');
    return { kind: 'refused', words };
  }

  /**
   * Under the lock: a batch of a round's recorded transactions (consecutive nonces) handed to the
   * node as one JSON-RPC batch, each answer settled as `broadcast` settles one, requests answered.
   * Returns null when every one went out, else the index from which the rest are to be closed and
   * asked again: just after the first one the node does not have and nothing after it has.
   *
   * One the node refused (or did not answer for, or a crash stopped before) while a later one of
   * the batch is on the node is never closed: its nonce must be used for the later ones to be
   * mined. It stays pending, its caller told the service's fault; the next settle broadcasts it
   * again or replaces it (`settle`).
   */
  async function deliverBatch(s: Sender, db: PoolClient, rows: readonly RelayerTransactionRow[], requests: readonly SendRequest[], counted: string[]): Promise<number | null> {
    const chainId = s.chain.chainId;
    const sentOf = (row: RelayerTransactionRow): SentTransaction => ({ txHash: row.tx_hash as Hex, nonce: Number(row.nonce) });
    // A throw of the hook stands for the process dying after that record: the ones before it go out.
    let crashedAt = rows.length;
    let crash: unknown = null;
    for (let i = 0; i < rows.length && crash === null; i++) {
      try {
        await opts.afterRecord?.(sentOf(rows[i]));
      } catch (err) {
        crashedAt = i;
        crash = err;
      }
    }
    const answers = await deliverFresh(s, rows.slice(0, crashedAt));
    // The last one the node has, or may have (no answer, and it could not say): none before it
    // is closed, whatever its answer.
    const lastKept = answers.reduce((last, a, i) => (a.kind === 'sent' || a.kind === 'no_answer' ? i : last), -1);
    const unanswered = answers.some((a) => a.kind === 'no_answer');
    for (let i = 0; i < answers.length; i++) {
      const [a, row, r] = [answers[i], rows[i], requests[i]];
      if (a.kind === 'sent') {
        counted.push(row.id);
        count(s, r.purpose, 'sent');
        log.info({ chain_id: chainId, purpose: r.purpose, subject: r.subject, tx_hash: row.tx_hash, nonce: Number(row.nonce) }, 'relayer transaction sent');
        r.resolve(sentOf(row));
        continue;
      }
      if (a.kind === 'not_ours') {
        // Its nonce was used by a transaction the records do not hold (the key used elsewhere): this
        // one can never be mined. Dropped; no hole (the nonce is used).
        await setRelayerStatus(db, row.id, 'dropped', { error: a.words });
        count(s, r.purpose, 'dropped');
        r.reject(new RelayerUnavailable(`chain ${chainId}: nonce ${row.nonce} of ${s.address} was used by a transaction the records do not hold; retried with the next`));
        if (i > lastKept) return i + 1;
        continue;
      }
      if (a.kind === 'no_answer') {
        // It may be on its way: kept pending, the next settle finds it on the node or broadcasts it again.
        r.reject(a.err);
        continue;
      }
      if (i < lastKept) {
        if (a.kind === 'out_of_gas') count(s, r.purpose, 'out_of_gas');
        log.warn(
          { chain_id: chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), purpose: r.purpose, answer: a.kind },
          'relayer transaction not taken by the node while a later one may be on it: kept, broadcast again or replaced by the next settle',
        );
        r.reject(new RelayerUnavailable(`${r.purpose} on chain ${chainId}: the node did not take the transaction (${a.kind}); it is broadcast again by the relayer's next settle`));
        continue;
      }
      if (a.kind === 'refused') {
        // Its nonce was never used.
        await setRelayerStatus(db, row.id, 'failed', { error: 'refused by the node' });
        count(s, r.purpose, 'refused');
        r.reject(new RelayerCallRefused(`${r.purpose} on chain ${chainId}: the node refused the transaction`, null));
      } else {
        // Refused outright: its nonce was never used, the next transaction takes it.
        await setRelayerStatus(db, row.id, 'failed', { error: 'insufficient funds' });
        count(s, r.purpose, 'out_of_gas');
        r.reject(a.err);
      }
      return i + 1;
    }
    // The node did not answer (for some of it): the round stops here; the batches after it were
    // never handed to the node.
    if (crash === null) return unanswered ? rows.length : null;
    requests[crashedAt].reject(crash);
    return crashedAt + 1;
  }

  /** Fresh transactions (their first broadcast) handed to the node together, in nonce order, each answer read. */
  async function deliverFresh(s: Sender, rows: readonly RelayerTransactionRow[]): Promise<Delivery[]> {
    const answers = await Promise.allSettled(rows.map((row) => s.client.request({ method: 'eth_sendRawTransaction', params: [row.raw_tx as Hex] })));
    return pMap(rows, (row, i) => readAnswer(s, row, answers[i], true), { concurrency: LOOKUPS_IN_FLIGHT });
  }

  /**
   * Under the sequence lock: settles the open transactions against the chain. A nonce the chain
   * has used: the transaction of it that was mined is `mined` (or `reverted`), the others
   * `dropped` (none with a receipt yet: left open up to RELAYER_STUCK_BLOCKS). A nonce still
   * open: broadcast again when the node does not know it; replaced with higher fees when stuck.
   * `sending`: a hold's, before its rounds (the used nonces settled a batch at a time). Returns the
   * chain head it read.
   */
  async function settle(s: Sender, db: PoolClient, { sending = false }: { sending?: boolean } = {}): Promise<bigint> {
    const head = await rpc(s, () => s.client.getBlockNumber({ cacheTime: 0 }));
    await refill(s, db, head);
    const open = await openRelayerTransactions(db, s.chain.chainId, s.address);
    if (open.length === 0) return head;
    const used = BigInt(await rpc(s, () => s.client.getTransactionCount({ address: s.address, blockTag: 'latest' })));
    const byNonce = new Map<string, RelayerTransactionRow[]>();
    for (const row of open) byNonce.set(row.nonce, [...(byNonce.get(row.nonce) ?? []), row]);
    // Nonces the chain has used: their receipts asked for at once, a batch of calls in flight
    // (after a burst of sends there are hundreds). Recording them mined is bookkeeping nothing
    // sent next depends on: a hold with sends waiting settles the oldest batch of them only, and
    // leaves the rest to later holds and the upkeep.
    const usedNonces = [...byNonce.keys()].filter((nonce) => BigInt(nonce) < used);
    if (sending) {
      let rowsTaken = 0;
      const within = usedNonces.findIndex((nonce) => (rowsTaken += byNonce.get(nonce)!.length) > LOOKUPS_IN_FLIGHT);
      if (within >= 0) usedNonces.splice(Math.max(1, within));
    }
    const usedRows = usedNonces.flatMap((nonce) => byNonce.get(nonce)!);
    const receipts = new Map(
      await pMap(usedRows, async (row) => [row.id, await receiptOf(s, row.tx_hash)] as const, { concurrency: LOOKUPS_IN_FLIGHT }),
    );
    const outcomes: { row: RelayerTransactionRow; status: 'mined' | 'reverted' | 'dropped'; minedBlock?: bigint }[] = [];
    for (const nonce of usedNonces) {
      const rows = byNonce.get(nonce)!;
      let minedId: string | null = null;
      for (const row of rows) {
        const receipt = receipts.get(row.id);
        if (!receipt) continue;
        minedId = row.id;
        outcomes.push({ row, status: receipt.status === 'success' ? 'mined' : 'reverted', minedBlock: receipt.blockNumber });
      }
      // Used, yet no receipt of ours: the count may already include a block whose receipt the
      // node (or another node behind the same URL) does not return yet. Dropped only once that
      // cannot be the reason any more, RELAYER_STUCK_BLOCKS after the last of them was sent.
      if (minedId === null && head - BigInt(rows[rows.length - 1].sent_at_block) < BigInt(opts.stuckBlocks)) continue;
      for (const row of rows) if (row.id !== minedId) outcomes.push({ row, status: 'dropped' });
    }
    await setRelayerStatuses(
      db,
      outcomes.map(({ row, status, minedBlock }) => ({ id: row.id, status, ...(minedBlock === undefined ? {} : { minedBlock }) })),
    );
    for (const { row, status, minedBlock } of outcomes) {
      count(s, row.purpose, status);
      if (minedBlock !== undefined) {
        log.info({ chain_id: s.chain.chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), purpose: row.purpose, status, block: Number(minedBlock) }, 'relayer transaction settled');
      }
    }
    // A nonce still open: its current transaction, known to the node or not. One the node took
    // within the last RECENT_BLOCKS blocks is not asked about (a hold after a burst of sends would
    // ask about hundreds it just broadcast); a later settle does, and a stuck one is replaced.
    const current = [...byNonce.entries()].filter(([nonce]) => BigInt(nonce) >= used).map(([, rows]) => rows[rows.length - 1]);
    const stuck = (row: RelayerTransactionRow) => head - BigInt(row.sent_at_block) >= BigInt(opts.stuckBlocks);
    const recent = (row: RelayerTransactionRow) => row.broadcasts > 0 && head - BigInt(row.sent_at_block) < RECENT_BLOCKS;
    const asked = current.filter((row) => !stuck(row) && !recent(row));
    const known = new Map(await pMap(asked, async (row) => [row.id, await nodeHas(s, row.tx_hash)] as const, { concurrency: LOOKUPS_IN_FLIGHT }));
    for (const row of current) {
      if (stuck(row)) {
        await replace(s, db, row, head);
      } else if (known.get(row.id) === false) {
        log.info({ chain_id: s.chain.chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), purpose: row.purpose }, 'relayer transaction unknown to the node: broadcast again');
        // Refused now (its fees below what the node takes today, say): signed again at today's
        // fees, same nonce. Never given up: a nonce left unused would hold every later one back.
        if (await broadcast(s, db, row)) count(s, row.purpose, 'rebroadcast');
        else await replace(s, db, row, head);
      }
    }
    return head;
  }

  /** The transaction's receipt, or null while the node has none. */
  async function receiptOf(s: Sender, hash: string): Promise<TransactionReceipt | null> {
    return rpc(s, async () => {
      try {
        return await s.client.getTransactionReceipt({ hash: hash as Hex });
      } catch (err) {
        if (err instanceof TransactionReceiptNotFoundError) return null;
        throw err;
      }
    });
  }

  /**
   * A nonce the records say is used but the node has neither mined nor pooled (a reorg took its
   * block, and the node did not put the transaction back in its pool) is a hole: no later
   * transaction of the key can be mined. Its recorded transaction is broadcast again, as it is (a
   * charge reorged out is a charge still owed; the contract still refuses a second one).
   */
  async function refill(s: Sender, db: PoolClient, head: bigint): Promise<void> {
    const pending = BigInt(await rpc(s, () => s.client.getTransactionCount({ address: s.address, blockTag: 'pending' })));
    const recorded = await nextRecordedNonce(db, s.chain.chainId, s.address);
    if (pending >= recorded) return;
    for (const row of await settledRelayerTransactions(db, s.chain.chainId, s.address, pending, recorded)) {
      if (await nodeHas(s, row.tx_hash)) continue;
      log.warn({ chain_id: s.chain.chainId, tx_hash: row.tx_hash, nonce: Number(row.nonce), purpose: row.purpose, was: row.status }, 'relayer transaction gone from the chain (a reorg): broadcast again');
      await reopenRelayerTransaction(db, row.id, head);
      if (await broadcast(s, db, row)) count(s, row.purpose, 'rebroadcast');
    }
  }

  /** The same transaction (nonce, call, gas) with fees at least 25% higher, or the market's if higher. */
  async function replace(s: Sender, db: PoolClient, old: RelayerTransactionRow, head: bigint): Promise<void> {
    const tx = parseTransaction(old.raw_tx as Hex);
    const fees = await rpc(s, () => s.client.estimateFeesPerGas());
    const maxPriorityFeePerGas = max(bump(BigInt(old.max_priority_fee_per_gas)), fees.maxPriorityFeePerGas);
    const maxFeePerGas = max(max(bump(BigInt(old.max_fee_per_gas)), fees.maxFeePerGas), maxPriorityFeePerGas);
    const gas = BigInt(old.gas_limit);
    const balance = await rpc(s, () => s.client.getBalance({ address: s.address }));
    if (balance < gas * maxFeePerGas) {
      count(s, old.purpose, 'out_of_gas');
      log.warn({ chain_id: s.chain.chainId, address: s.address, tx_hash: old.tx_hash, balance: formatEther(balance) }, 'relayer transaction stuck and the relayer cannot pay higher fees: fund it');
      return;
    }
    const raw = await s.account.signTransaction({
      chainId: s.chain.chainId,
      type: 'eip1559',
      to: tx.to!,
      data: tx.data,
      nonce: Number(old.nonce),
      gas,
      maxFeePerGas,
      maxPriorityFeePerGas,
    });
    const row = await insertRelayerTransaction(db, {
      chainId: s.chain.chainId,
      from: s.address,
      nonce: BigInt(old.nonce),
      txHash: keccak256(raw),
      rawTx: raw,
      purpose: old.purpose,
      subject: old.subject,
      contract: old.contract_address,
      gasLimit: gas,
      maxFeePerGas,
      maxPriorityFeePerGas,
      sentAtBlock: head,
      replacesId: old.id,
    });
    await setRelayerStatus(db, old.id, 'replaced');
    log.warn(
      { chain_id: s.chain.chainId, nonce: Number(old.nonce), stuck_blocks: Number(head - BigInt(old.sent_at_block)), old_tx_hash: old.tx_hash, tx_hash: row.tx_hash, max_fee_per_gas: maxFeePerGas.toString() },
      'relayer transaction stuck: replaced with higher fees',
    );
    if (await broadcast(s, db, row)) count(s, old.purpose, 'replaced');
    else {
      // Refused (underpriced for this node): the old one stays the current one of its nonce.
      await setRelayerStatus(db, row.id, 'failed', { error: 'replacement refused' });
      await setRelayerStatus(db, old.id, 'pending');
      if (head - BigInt(old.sent_at_block) >= BigInt(opts.stuckBlocks) && old.purpose !== 'filler') await fillNonce(s, db, old, head, { maxFeePerGas, maxPriorityFeePerGas });
    }
  }

  /**
   * A nonce whose call the node still refuses RELAYER_STUCK_BLOCKS after it was signed, at today's
   * fees too (the call itself refused, for the node's own reasons), would hold every later
   * transaction of the key back for good. It is used by a no-op instead: nothing sent to the
   * relayer itself, 21,000 gas, the replacement's fees. The call's row turns `replaced` (should the
   * call land after all, the settle finds its receipt and the filler is dropped); once the filler
   * is mined the call's row is `dropped`, and its job, finding no live transaction for the
   * subject, asks for it afresh at a new nonce. A filler refused too changes nothing: the call
   * stays the nonce's current transaction, tried again at the next settle.
   */
  async function fillNonce(s: Sender, db: PoolClient, old: RelayerTransactionRow, head: bigint, fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }): Promise<void> {
    const raw = await s.account.signTransaction({
      chainId: s.chain.chainId,
      type: 'eip1559',
      to: s.address,
      value: 0n,
      nonce: Number(old.nonce),
      gas: FILLER_GAS,
      ...fees,
    });
    const filler = await insertRelayerTransaction(db, {
      chainId: s.chain.chainId,
      from: s.address,
      nonce: BigInt(old.nonce),
      txHash: keccak256(raw),
      rawTx: raw,
      purpose: 'filler',
      subject: `filler:${old.nonce}`,
      contract: s.address,
      gasLimit: FILLER_GAS,
      ...fees,
      sentAtBlock: head,
      replacesId: old.id,
    });
    await setRelayerStatus(db, old.id, 'replaced');
    log.warn(
      { chain_id: s.chain.chainId, nonce: Number(old.nonce), purpose: old.purpose, subject: old.subject, old_tx_hash: old.tx_hash, tx_hash: filler.tx_hash },
      'relayer transaction refused by the node for good: its nonce used by a no-op so the later ones can be mined; the call is asked for again by its job',
    );
    if (await broadcast(s, db, filler)) count(s, 'filler', 'sent');
    else {
      await setRelayerStatus(db, filler.id, 'failed', { error: 'filler refused' });
      await setRelayerStatus(db, old.id, 'pending');
    }
  }

  /**
   * Queues a send. The sender's queue is drained under one hold of the sequence lock: concurrent
   * callers (the charge job's parallel lanes) wait in memory, not on Postgres, and share one
   * settle per hold.
   */
  function send(chainId: number, purpose: RelayerPurpose, subject: string, to: Address, data: Hex, gas?: bigint): Promise<SentTransaction> {
    return new Promise<SentTransaction>((resolve, reject) => {
      // Inside the executor: no relayer for the chain is a rejection, as from any other send.
      const s = senderOf(chainId);
      s.queue.push({ purpose, subject, to, data, gas, resolve, reject });
      if (!s.draining) void drain(s);
    });
  }

  async function drain(s: Sender): Promise<void> {
    s.draining = true;
    try {
      while (s.queue.length > 0) {
        const taken: SendRequest[] = [];
        let leftover: SendRequest[] = [];
        try {
          leftover = await withSequenceLock(pool, s.chain.chainId, s.address, (db) => hold(s, db, taken));
        } catch (err) {
          // The lock, the settle or the database failed: each request waiting fails as a send of
          // its own would have (it would have met the same failure). Those already answered keep
          // their answer (a promise settles once).
          for (const r of [...taken, ...s.queue.splice(0)]) r.reject(err);
        }
        s.queue.unshift(...leftover);
      }
    } finally {
      s.draining = false;
    }
  }

  /**
   * One hold of the sequence lock: settles once, then sends the queued requests in rounds until the
   * queue is empty or the hold has lasted HOLD_MAX_MS (other processes and the upkeep wait on the
   * same lock). Returns the requests it did not get to (put back in the queue for the next hold).
   */
  async function hold(s: Sender, db: PoolClient, taken: SendRequest[]): Promise<SendRequest[]> {
    await settle(s, db, { sending: true });
    const started = Date.now();
    while (s.queue.length > 0 && Date.now() - started < HOLD_MAX_MS) {
      const round = s.queue.splice(0, ROUND_MAX);
      taken.push(...round);
      const rest = await sendRound(s, db, round);
      if (rest.length > 0) return rest;
    }
    return [];
  }

  /**
   * One round under the hold: the node's answers every send needs (fees, balance, pending count,
   * head, each call's gas) read at once, then each request signed, recorded, broadcast, in turn.
   * A fault that is not the request's own (the node not answering, the database, a crash) ends the
   * hold: the requests after it are returned untouched, to start again with a fresh settle.
   */
  async function sendRound(s: Sender, db: PoolClient, round: SendRequest[]): Promise<SendRequest[]> {
    const chainId = s.chain.chainId;
    const todo: SendRequest[] = [];
    const live = await liveTransactionsFor(db, chainId, s.address, [...new Set(round.map((r) => r.subject))]);
    for (const r of round) {
      const row = live.get(r.subject);
      if (row) r.resolve({ txHash: row.tx_hash as Hex, nonce: Number(row.nonce) });
      else todo.push(r);
    }
    if (todo.length === 0) return [];
    // A charge simulated just before comes with its gas (the simulation was the estimate): not asked twice.
    const estimates = todo.map((r) => (r.gas !== undefined ? Promise.resolve({ gas: r.gas }) : estimateGasOf(s, r).then((gas) => ({ gas }), (err: unknown) => ({ err }))));
    const shared = Promise.all([
      rpc(s, () => s.client.getBlockNumber({ cacheTime: 0 })),
      rpc(s, () => s.client.estimateFeesPerGas()),
      rpc(s, () => s.client.getBalance({ address: s.address })),
      rpc(s, () => s.client.getTransactionCount({ address: s.address, blockTag: 'pending' })).then(BigInt),
    ]);
    const read = await shared.then((values) => ({ values }), (err: unknown) => ({ err }));
    if ('err' in read) {
      await Promise.all(estimates);
      for (const r of todo) r.reject(read.err);
      return [];
    }
    const [head, fees, balance, pendingCount] = read.values;
    const gases = await Promise.all(estimates);
    // The next nonce: read from the records once, then kept here. Only this hold writes the
    // sequence's records meanwhile (the lock); a nonce whose transaction was refused (its row
    // `failed`) is taken by the next one. The node's counts guard against transactions of the key
    // the records do not know (nextNonce).
    let nonce: bigint;
    try {
      nonce = await nextNonce(s, db, pendingCount);
    } catch (err) {
      if (!(err instanceof RelayerUnavailable)) throw err;
      for (const r of todo) r.reject(err);
      return [];
    }
    // Each request signed with the next nonce, all of them recorded in one statement (one commit),
    // then broadcast one by one in nonce order.
    const signed: { r: SendRequest; tx: NewRelayerTransaction }[] = [];
    const firstOf = new Set<string>();
    const later: SendRequest[] = [];
    for (let i = 0; i < todo.length; i++) {
      const r = todo[i];
      if (firstOf.has(r.subject)) {
        // Asked twice in one round: the second finds the first's transaction at the next hold.
        later.push(r);
        continue;
      }
      const estimate = gases[i];
      if ('err' in estimate) {
        r.reject(estimate.err);
        continue;
      }
      try {
        signed.push({ r, tx: await signOne(s, r, estimate.gas, head, fees, balance, nonce) });
        firstOf.add(r.subject);
        nonce += 1n;
      } catch (err) {
        // Out of gas: nothing signed, its nonce not used.
        r.reject(err);
      }
    }
    if (signed.length === 0) return later;
    let rows: RelayerTransactionRow[];
    try {
      rows = await insertRelayerTransactions(
        db,
        signed.map((x) => x.tx),
      );
    } catch (err) {
      for (const { r } of signed) r.reject(err);
      return later;
    }
    const counted: string[] = [];
    try {
      // Handed to the node a batch at a time, in nonce order (one HTTP request each, not one per
      // transaction: a round's wall time is the node's, not the event loop's turns).
      for (let from = 0; from < signed.length; from += RPC_BATCH_SIZE) {
        const upTo = Math.min(signed.length, from + RPC_BATCH_SIZE);
        const stop = await deliverBatch(s, db, rows.slice(from, upTo), signed.slice(from, upTo).map((x) => x.r), counted);
        if (stop === null) continue;
        // Stopped (refused, out of gas, no answer, a crash, a nonce not ours), and nothing after
        // that one is on the node: those after it were recorded and never took. Broadcast later,
        // they could wait behind a nonce never used; so they are closed as never sent, and their
        // requests go to the next hold, signed again after the sequence as it then stands.
        await closeUnsent(
          db,
          rows.slice(from + stop).map((x) => x.id),
        );
        return [...signed.slice(from + stop).map((x) => x.r), ...later];
      }
    } finally {
      await countBroadcasts(db, counted).catch((err: unknown) => log.warn({ chain_id: chainId, reason: wordsOf(err) }, 'relayer: the broadcasts of a round were not counted'));
    }
    return later;
  }

  /**
   * Under the lock: the round's first nonce. The records' next, unless the node counts more: mined
   * transactions of the key the records do not hold are stepped over; a count beyond the mined one
   * is only the node's word for transactions in its pool, and signing past it on a lie would leave
   * a hole no transaction fills, every later one waiting behind it: RelayerUnavailable until the
   * node's pool and the chain agree (those transactions mined, or the node telling the truth).
   */
  async function nextNonce(s: Sender, db: PoolClient, pendingCount: bigint): Promise<bigint> {
    const recorded = await nextRecordedNonce(db, s.chain.chainId, s.address);
    if (pendingCount <= recorded) return recorded;
    const mined = BigInt(await rpc(s, () => s.client.getTransactionCount({ address: s.address, blockTag: 'latest' })));
    if (mined >= pendingCount) return mined;
    log.warn(
      { chain_id: s.chain.chainId, address: s.address, recorded: Number(recorded), mined: Number(mined), pending: Number(pendingCount) },
      'relayer: the node counts pending transactions of the key that the records do not hold; not signing past them until they are mined',
    );
    throw new RelayerUnavailable(
      `chain ${s.chain.chainId}: the node counts ${pendingCount - max(recorded, mined)} pending transaction(s) of ${s.address} the records do not hold; retried once they are mined`,
    );
  }

  /** eth_estimateGas of one request: a revert is RelayerCallRefused, no gas RelayerOutOfGas. */
  async function estimateGasOf(s: Sender, r: SendRequest): Promise<bigint> {
    const chainId = s.chain.chainId;
    return rpc(s, async () => {
      try {
        return await s.client.estimateGas({ account: s.address, to: r.to, data: r.data });
      } catch (err) {
        const words = wordsOf(err);
        if (/insufficient funds/i.test(words)) {
          count(s, r.purpose, 'out_of_gas');
          throw new RelayerOutOfGas(chainId, s.address, `relayer ${s.address} on chain ${chainId} cannot pay the gas: fund it`);
        }
        const decoded = isRevert(err)?.data?.errorName ?? revertNameIn(err);
        if (decoded !== null || /revert/i.test(words)) throw new RelayerCallRefused(`${r.purpose} on chain ${chainId} would revert: ${decoded ?? words}`, decoded);
        throw err;
      }
    });
  }

  /** Under the lock: one request signed with `nonce` (refused when the relayer cannot pay its gas), ready to be recorded. */
  async function signOne(
    s: Sender,
    r: SendRequest,
    gas: bigint,
    head: bigint,
    fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
    balance: bigint,
    nonce: bigint,
  ): Promise<NewRelayerTransaction> {
    const chainId = s.chain.chainId;
    const { purpose, subject, to, data } = r;
    // Headroom over the estimate: a charge's token calls may cost a little more when mined.
    const gasLimit = (gas * 120n) / 100n;
    // A gas limit any node refuses for good (below the intrinsic cost) or that no charge needs (a
    // lying estimate): refused before it is signed. Broadcast in a batch whose later transactions
    // the node takes, it would be a nonce no rebroadcast fills.
    const intrinsic = intrinsicGasOf(data);
    if (gasLimit < intrinsic || gasLimit > MAX_GAS) {
      throw new RelayerUnavailable(`${purpose} on chain ${chainId}: the node's gas estimate ${gas} is outside ${intrinsic}..${MAX_GAS}; not signed`);
    }
    if (balance < gasLimit * fees.maxFeePerGas) {
      count(s, purpose, 'out_of_gas');
      throw new RelayerOutOfGas(
        chainId,
        s.address,
        `relayer ${s.address} on chain ${chainId} holds ${formatEther(balance)}, less than the ${formatEther(gasLimit * fees.maxFeePerGas)} this ${purpose} may cost: fund it`,
      );
    }
    const raw = await s.account.signTransaction({
      chainId,
      type: 'eip1559',
      to,
      data,
      nonce: Number(nonce),
      gas: gasLimit,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    return {
      chainId,
      from: s.address,
      nonce,
      txHash: keccak256(raw),
      rawTx: raw,
      purpose,
      subject,
      contract: to,
      gasLimit,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      sentAtBlock: head,
    };
  }

  async function tokenLabel(s: Sender, token: Address): Promise<{ symbol: string; decimals: number }> {
    const known = s.chain.tokens.find((t) => t.address.toLowerCase() === token.toLowerCase());
    if (known) return { symbol: known.currency, decimals: known.decimals };
    const [symbol, decimals] = await Promise.all([
      rpc(s, () => s.reader.readContract({ address: token, abi: ERC20_READ_ABI, functionName: 'symbol' })).catch(() => 'tokens'),
      rpc(s, () => s.reader.readContract({ address: token, abi: ERC20_READ_ABI, functionName: 'decimals' })),
    ]);
    return { symbol, decimals };
  }

  /** The chain's time, its latest block's (unix seconds): read at most every CHAIN_CLOCK_POLL_MS, however many ask. */
  function chainSeconds(s: Sender): Promise<number> {
    if (s.clock.reading) return s.clock.reading;
    if (Date.now() - s.clock.readAt < CHAIN_CLOCK_POLL_MS) return Promise.resolve(s.clock.seconds);
    const reading = rpc(s, () => s.reader.getBlock({ blockTag: 'latest' })).then(
      (block) => {
        s.clock = { seconds: Number(block.timestamp), readAt: Date.now(), reading: null };
        return s.clock.seconds;
      },
      (err: unknown) => {
        s.clock.reading = null;
        throw err;
      },
    );
    s.clock.reading = reading;
    return reading;
  }

  /** Whether the chain's latest block reaches `at` (unix seconds) within `maxMs`. */
  async function chainReaches(s: Sender, at: number, maxMs: number): Promise<boolean> {
    const deadline = Date.now() + maxMs;
    for (;;) {
      if ((await chainSeconds(s)) >= at) return true;
      if (Date.now() >= deadline) return false;
      await sleep(CHAIN_CLOCK_POLL_MS);
    }
  }

  async function simulateCharge(chainId: number, args: ChargeArgs): Promise<SimulateChargeResult> {
    const s = senderOf(chainId);
    const { beginsAt, ...first } = await simulateOnce(s, args);
    // Begun by our clock, not yet by the chain's latest block (blocks come every few seconds, the
    // charge job runs as the period begins): simulated again once a block says so, not left for
    // the job's next look.
    if (beginsAt === undefined || beginsAt > Date.now() / 1000) return first;
    if (!(await chainReaches(s, beginsAt, CHAIN_CLOCK_WAIT_MS))) return first;
    const { beginsAt: _, ...again } = await simulateOnce(s, args);
    return again;
  }

  /** One simulation; a period not begun says when it begins (`beginsAt`, unix seconds). */
  async function simulateOnce(s: Sender, args: ChargeArgs): Promise<SimulateChargeResult & { beginsAt?: number }> {
    const chainId = s.chain.chainId;
    try {
      // eth_estimateGas rather than eth_call: the same execution from the operator, reverting the
      // same way, and its gas is what the send needs (one call to the node per charge, not two).
      // Against the latest block, as an eth_call is: a node's pending block may already carry a
      // time past the period's start that the block the charge lands in does not.
      const gas = await s.reader.estimateContractGas({
        blockTag: 'latest',
        account: s.address,
        address: args.contract,
        abi: SUBSCRIPTION_MANAGER_ABI,
        functionName: 'charge',
        args: [args.onchainId, args.periodIndex, args.paymentReference],
      });
      return { ok: true, gas };
    } catch (err) {
      const revert = isRevert(err);
      if (!revert) throw unavailableOr(err, chainId);
      const name = revert.data?.errorName ?? null;
      switch (name) {
        case 'SubscriptionCanceled':
          return { ok: false, code: 'subscription_canceled', message: 'The subscription was canceled, so this period cannot be charged.' };
        case 'SubscriptionEnded': {
          const endsAt = Number(revert.data!.args![1]);
          return { ok: false, code: 'subscription_ended', message: `The subscription ended on ${new Date(endsAt * 1000).toISOString().slice(0, 10)}, so this period cannot be charged.` };
        }
        case 'PeriodNotBegun': {
          const beginsAt = Number(revert.data!.args![2] as bigint);
          return { ok: false, code: 'period_not_begun', beginsAt, message: `This period has not begun yet: it begins at ${new Date(beginsAt * 1000).toISOString()}.` };
        }
        case 'PeriodAlreadyCharged':
          return { ok: false, code: 'period_already_charged', message: 'This period was already charged.' };
        case 'UnknownSubscription':
        case 'NotOperator':
          throw new RelayerCallRefused(`charge of subscription ${args.onchainId} on chain ${chainId} would revert ${name}: not a subscription this relayer operates`, name);
        default:
          // The token refused the transfer (SafeERC20FailedOperation, or the token's own error):
          // the revert does not say whether the balance or the allowance is short; the chain does.
          return classifyShortfall(s, args, name);
      }
    }
  }

  async function classifyShortfall(s: Sender, args: ChargeArgs, errorName: string | null): Promise<SimulateChargeResult> {
    const chainId = s.chain.chainId;
    const sub = await rpc(s, () => s.reader.readContract({ address: args.contract, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'getSubscription', args: [args.onchainId] }));
    const [balance, allowance, label] = await Promise.all([
      rpc(s, () => s.reader.readContract({ address: sub.token, abi: ERC20_READ_ABI, functionName: 'balanceOf', args: [sub.subscriber] })),
      rpc(s, () => s.reader.readContract({ address: sub.token, abi: ERC20_READ_ABI, functionName: 'allowance', args: [sub.subscriber, args.contract] })),
      tokenLabel(s, sub.token),
    ]);
    const amount = BigInt(sub.amount);
    const units = (v: bigint) => `${formatUnits(v, label.decimals)} ${label.symbol}`;
    if (balance < amount) {
      const short = amount - balance;
      return {
        ok: false,
        code: 'insufficient_balance',
        shortAtomic: short,
        message: `Your wallet holds ${units(balance)} but this period costs ${units(amount)}: ${units(short)} short. Add at least ${units(short)} to the wallet you subscribed with.`,
      };
    }
    if (allowance < amount) {
      const short = amount - allowance;
      return {
        ok: false,
        code: 'insufficient_allowance',
        shortAtomic: short,
        message: `Your wallet allows the subscription to take ${units(allowance)} but this period costs ${units(amount)}: the allowance is ${units(short)} short. Approve at least ${units(amount)} for the subscription again.`,
      };
    }
    throw new RelayerCallRefused(`charge of subscription ${args.onchainId} on chain ${chainId} would revert${errorName ? ` ${errorName}` : ''} though balance and allowance cover it`, errorName);
  }

  async function upkeepOne(s: Sender): Promise<void> {
    // Sends of this process are waiting for the next hold, which settles first: the upkeep would
    // only take the lock between two holds and delay the next (a burst of charges).
    if (s.queue.length === 0) await withSequenceLock(pool, s.chain.chainId, s.address, (db) => settle(s, db));
    const balance = await rpc(s, () => s.client.getBalance({ address: s.address }));
    const labels = { chain_id: String(s.chain.chainId), address: s.address };
    opts.metrics?.nativeBalance.set(labels, Number(formatEther(balance)));
    const low = balance < minBalanceWei;
    opts.metrics?.lowBalance.set(labels, low ? 1 : 0);
    if (low && s.low !== true) {
      log.warn(
        { chain_id: s.chain.chainId, address: s.address, balance: formatEther(balance), min_balance: opts.minBalance },
        'relayer balance is low: fund it, or charges will fail for lack of gas (RELAYER_MIN_BALANCE)',
      );
    } else if (!low && s.low === true) {
      log.info({ chain_id: s.chain.chainId, address: s.address, balance: formatEther(balance) }, 'relayer balance is above its minimum again');
    }
    s.low = low;
  }

  return {
    operatorAddress: (chainId) => senders.get(chainId)?.address ?? null,
    simulateCharge,
    sendCharge: (chainId, args) =>
      send(
        chainId,
        'charge',
        chargeSubject(args),
        args.contract,
        encodeFunctionData({ abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'charge', args: [args.onchainId, args.periodIndex, args.paymentReference] }),
        args.gas,
      ),
    sendCancel: (chainId, args) =>
      send(chainId, 'cancel', cancelSubject(args), args.contract, encodeFunctionData({ abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'cancel', args: [args.onchainId] })),
    async upkeep() {
      for (const s of senders.values()) {
        try {
          await upkeepOne(s);
          if (s.upkeepFailure !== null) log.info({ chain_id: s.chain.chainId, address: s.address }, 'relayer upkeep works again');
          s.upkeepFailure = null;
        } catch (err) {
          // Once per streak: a chain down for an hour is one warning, not one per upkeep.
          const reason = wordsOf(err);
          if (s.upkeepFailure !== reason) log.warn({ chain_id: s.chain.chainId, address: s.address, reason }, 'relayer upkeep failed; retried at each next one (warned again when the reason changes)');
          s.upkeepFailure = reason;
        }
      }
    },
    describe: () => [...senders.values()].map((s) => ({ chain_id: s.chain.chainId, operator: s.address, key: s.source })),
  };
}
