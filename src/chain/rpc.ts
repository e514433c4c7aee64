// One chain's JSON-RPC, as the payment detector uses it: viem over the chain's URLs (tried in
// order, `fallback`), or over a quorum of them that must agree (CHAIN_RPC_QUORUM), requests
// batched, every call counted by method and outcome. A call fails
// fast (no retries here): the watcher backs off between runs instead. What a failure means is
// decided here, once, from viem's error classes (classifyRpcError): a range or response the
// provider will not serve, a rate limit, an outage, or none of these (a bug: the run fails).
import {
  BaseError,
  BlockNotFoundError,
  createPublicClient,
  fallback,
  HttpRequestError,
  http,
  LimitExceededRpcError,
  ResponseBodyTooLargeError,
  RpcError,
  RpcRequestError,
  SocketClosedError,
  TimeoutError,
  webSocket,
  WebSocketRequestError,
  type PublicClient,
  type Transport,
} from 'viem';
import { stringify } from 'safe-stable-stringify';
import { InconsistentLogsError, VotersDisagreeError } from './inconsistent-answer.js';

export type RpcOutcome = 'ok' | 'error' | 'range_refused' | 'rate_limited';

export interface BlockHeader {
  number: bigint;
  hash: string;
  parentHash: string;
  timestamp: bigint;
}

export interface ChainRpc {
  blockNumber(): Promise<bigint>;
  block(number: bigint): Promise<BlockHeader>;
  /** The block, or null when the node has none of that number (a lagging node, a lying head, a chain rolled back). */
  blockIfAny(number: bigint): Promise<BlockHeader | null>;
  /**
   * One eth_getLogs, as a kind of log asks it (chain/kinds/): `query` calls the client's getLogs.
   * `narrow`: the range is one block the provider would not serve whole; asked again with the
   * larger limit of one block's logs (ONE_BLOCK_MAX_BYTES).
   */
  getLogs<T>(narrow: boolean, query: (client: PublicClient) => Promise<T>): Promise<T>;
}

/** Where a log is: every kind's decoded log carries it. */
export interface LogPosition {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  /** Some nodes put the block's time on its logs; else null (read from the block). */
  blockTimestamp: bigint | null;
}

const TIMEOUT_MS = 15_000;

/**
 * The most one block's logs of one address may take, read when they are over viem's 10 MiB.
 * Honest answers are bounded by the block's gas: a token Transfer costs at least ~7,500 gas (two
 * balance writes and the log) and takes ~700 bytes of JSON, so even a 500M-gas block holds under
 * 50 MB of them. An answer is not bounded by anything else: read whole, a node streaming an
 * endless body filled the worker's memory until the request's timeout (or the process died). Not
 * more: an answer just under the limit is parsed, several times its size in memory, once per voter.
 */
export const ONE_BLOCK_MAX_BYTES = 128 * 1024 * 1024;
/** Heads of a quorum's voters further apart than this fail the run (see createChainRpc). */
const HEAD_SPREAD_BLOCKS = 32n;

/**
 * What a failed RPC call means for the watcher:
 * - `range`: the provider will not serve this range or this much (a refusal naming a range or a
 *   result count, or a response over viem's size limit): ask for fewer blocks, or fewer addresses;
 * - `rate_limit`: a rate limit (HTTP 429, -32005 LimitExceededRpcError that names no range): back off;
 * - `outage`: the provider is down, slow or failing (HTTP, socket, timeout, any other JSON-RPC error): back off;
 * - null: not an RPC failure at all (a database error, a bug): the run fails loudly.
 */
export type RpcFailure = 'range' | 'rate_limit' | 'outage';

// Refusals of a range or of a result size, as providers word them ("query exceeds max block range
// 50", "query returned more than 10000 results", "Log response size exceeded", "block range is too
// wide"); never a rate limit, which some word with "exceeded" too.
const RANGE_WORDING = /range|results|response size|too large|too wide|too many (logs|blocks)|more than \d/i;
const RATE_WORDING = /\brate\b|rate[- ]?limit|per second|capacity|daily|request count|compute units|too many requests/i;

function wording(e: unknown): string {
  if (e instanceof BaseError) return `${e.shortMessage} ${e.details ?? ''}`;
  return e instanceof Error ? e.message : '';
}

export function classifyRpcError(err: unknown): RpcFailure | null {
  if (!(err instanceof BaseError)) return null;
  const all: unknown[] = [];
  err.walk((e) => {
    all.push(e);
    return false;
  });
  if (all.some((e) => e instanceof ResponseBodyTooLargeError)) return 'range';
  const rpc = all.filter((e): e is RpcError | RpcRequestError => e instanceof RpcError || e instanceof RpcRequestError);
  if (rpc.some((e) => RANGE_WORDING.test(wording(e)) && !RATE_WORDING.test(wording(e)))) return 'range';
  if (all.some((e) => (e instanceof HttpRequestError && e.status === 429) || e instanceof LimitExceededRpcError || (e instanceof Error && RATE_WORDING.test(wording(e)) && rpc.length > 0))) return 'rate_limit';
  if (
    rpc.length > 0 ||
    all.some((e) => e instanceof HttpRequestError || e instanceof WebSocketRequestError || e instanceof SocketClosedError || e instanceof TimeoutError || e instanceof BlockNotFoundError)
  ) {
    return 'outage';
  }
  return null;
}

/** A provider's refusal of a range or result size (as opposed to an outage): shrink and retry. */
export function isRangeRefusal(err: unknown): boolean {
  return classifyRpcError(err) === 'range';
}

/** An RPC URL fit for a log line: no credentials, no path or query (API keys live there). */
export function redactRpcUrl(url: string): string {
  try {
    const u = new URL(url);
    const hidden = u.pathname.replace(/\/+$/, '') !== '' || u.search !== '' || u.username !== '' || u.password !== '';
    return `${u.protocol}//${u.host}${hidden ? '/***' : ''}`;
  } catch {
    return '[unparseable url]';
  }
}

/** The chain id one RPC URL answers (eth_chainId), asked of that URL alone; counted like every call. */
export async function chainIdAt(url: string, count: (method: string, outcome: RpcOutcome) => void): Promise<number> {
  const client = createPublicClient({ transport: one(url) });
  try {
    const id = await client.getChainId();
    count('eth_chainId', 'ok');
    return id;
  } catch (err) {
    count('eth_chainId', classifyRpcError(err) === 'rate_limit' ? 'rate_limited' : 'error');
    throw err;
  }
}

/** One URL's transport; `maxResponseBodySize`: viem's default (10 MiB) unless given. */
function one(url: string, maxResponseBodySize?: number): Transport {
  return url.startsWith('ws')
    ? webSocket(url, { retryCount: 0, timeout: TIMEOUT_MS })
    : http(url, { retryCount: 0, timeout: TIMEOUT_MS, batch: { batchSize: 100, wait: 0 }, ...(maxResponseBodySize === undefined ? {} : { maxResponseBodySize }) });
}

function transportOf(urls: string[], maxResponseBodySize?: number): Transport {
  return urls.length === 1 ? one(urls[0], maxResponseBodySize) : fallback(urls.map((u) => one(u, maxResponseBodySize)), { retryCount: 0 });
}

/**
 * A range's logs as compared between providers: each decoded log without what honest nodes may
 * give differently (the letter case of hex, a `blockTimestamp` some add), in a fixed order.
 */
function logsKey(answer: unknown): string {
  const plain = (l: unknown) => stringify(l, (k, v: unknown) => (k === 'blockTimestamp' ? undefined : typeof v === 'string' ? v.toLowerCase() : v)) ?? '';
  return Array.isArray(answer) ? answer.map(plain).sort().join('\n') : plain(answer);
}

/**
 * An RPC over `urls` (the chain's URLs that answered its chain id, the lead first). `quorum`
 * (CHAIN_RPC_QUORUM): how many of them, from the lead, must agree, each asked alone: a range's
 * logs must be the same from each, a block's header too (hash, parent, time), and the head is the
 * lowest they answer. A difference fails the answer (InconsistentLogsError), so one lying provider
 * can neither make a log believed nor hide one, nor move the scan past blocks it made up; at most
 * it stalls the scan.
 */
export function createChainRpc(urls: string[], count: (method: string, outcome: RpcOutcome) => void, quorum = 1): ChainRpc {
  if (urls.length < quorum) throw new Error(`a quorum of ${quorum} needs as many RPC URLs, not ${urls.length}`);
  const client: PublicClient = createPublicClient({ transport: transportOf(urls) });
  // For one block's logs that are over viem's response size limit (10 MiB): spam can fill a
  // block, and a block that is never read stops the cursor for good.
  const oneBlock: PublicClient = createPublicClient({ transport: transportOf(urls, ONE_BLOCK_MAX_BYTES) });
  const voters =
    quorum > 1
      ? urls.slice(0, quorum).map((u) => ({ url: u, client: createPublicClient({ transport: one(u) }), oneBlock: createPublicClient({ transport: one(u, ONE_BLOCK_MAX_BYTES) }) }))
      : [];
  async function counted<T>(method: string, call: () => Promise<T>): Promise<T> {
    try {
      const result = await call();
      count(method, 'ok');
      return result;
    } catch (err) {
      const failure = classifyRpcError(err);
      count(method, failure === 'range' ? 'range_refused' : failure === 'rate_limit' ? 'rate_limited' : 'error');
      throw err;
    }
  }
  /** Asked again with one block's limit when `narrow` and the answer was over viem's. */
  async function sized<T>(on: { client: PublicClient; oneBlock: PublicClient }, narrow: boolean, call: (c: PublicClient) => Promise<T>): Promise<T> {
    try {
      return await counted('eth_getLogs', () => call(on.client));
    } catch (err) {
      if (!narrow || !(err instanceof BaseError) || !err.walk((e) => e instanceof ResponseBodyTooLargeError)) throw err;
      return counted('eth_getLogs', () => call(on.oneBlock));
    }
  }
  /** The voters' answers must be the same by `key`; the lead's is returned. */
  function agreed<T>(what: string, answers: T[], key: (a: T) => string): T {
    const keys = answers.map(key);
    const odd = keys.findIndex((k) => k !== keys[0]);
    if (odd > 0) throw new VotersDisagreeError(`RPC URLs ${redactRpcUrl(voters[0].url)} and ${redactRpcUrl(voters[odd].url)} answered different ${what}`);
    return answers[0];
  }
  async function getLogs<T>(narrow: boolean, call: (c: PublicClient) => Promise<T>): Promise<T> {
    if (voters.length === 0) return sized({ client, oneBlock }, narrow, call);
    return agreed('logs for the same question', await Promise.all(voters.map((v) => sized(v, narrow, call))), logsKey);
  }
  const header = (b: { number: bigint | null; hash: string | null; parentHash: string; timestamp: bigint }): BlockHeader => ({
    number: b.number!,
    // Hex in lower case, as the logs' (event-logs.ts): hashes are compared and recorded so.
    hash: b.hash!.toLowerCase(),
    parentHash: b.parentHash.toLowerCase(),
    timestamp: b.timestamp,
  });
  const headerKey = (h: BlockHeader) => `${h.hash} ${h.parentHash} ${h.timestamp}`;
  const blockOf = (c: PublicClient, number: bigint) => counted('eth_getBlockByNumber', async () => header(await c.getBlock({ blockNumber: number })));
  const blockIfAnyOf = (c: PublicClient, number: bigint) =>
    counted('eth_getBlockByNumber', async () => {
      try {
        return header(await c.getBlock({ blockNumber: number }));
      } catch (err) {
        if (err instanceof BlockNotFoundError) return null;
        throw err;
      }
    });
  if (voters.length === 0) {
    return {
      blockNumber: () => counted('eth_blockNumber', () => client.getBlockNumber({ cacheTime: 0 })),
      block: (number) => blockOf(client, number),
      blockIfAny: (number) => blockIfAnyOf(client, number),
      getLogs,
    };
  }
  return {
    // The lowest head: a provider answering a higher one (blocks it made up) moves nothing. One far
    // below the others (frozen, or lying low to hold the scan back) fails the run, so the next
    // run's voters start one URL further on.
    blockNumber: async () => {
      const heads = await Promise.all(voters.map((v) => counted('eth_blockNumber', () => v.client.getBlockNumber({ cacheTime: 0 }))));
      const low = heads.reduce((a, b) => (b < a ? b : a));
      const high = heads.reduce((a, b) => (b > a ? b : a));
      if (high - low > HEAD_SPREAD_BLOCKS) {
        const at = (h: bigint) => redactRpcUrl(voters[heads.indexOf(h)].url);
        throw new InconsistentLogsError(`RPC URLs ${at(high)} and ${at(low)} answered heads ${high} and ${low}, more than ${HEAD_SPREAD_BLOCKS} blocks apart`);
      }
      return low;
    },
    block: async (number) => agreed(`blocks ${number}`, await Promise.all(voters.map((v) => blockOf(v.client, number))), headerKey),
    // None when no voter has it; when some have it and some do not, the answer is refused: "no
    // such block" from one voter is never taken as the chain having changed (a reorg, a rewind).
    blockIfAny: async (number) => {
      const answers = await Promise.all(voters.map((v) => blockIfAnyOf(v.client, number)));
      const headers = answers.filter((h): h is BlockHeader => h !== null);
      if (headers.length === 0) return null;
      if (headers.length < answers.length) {
        const has = answers.findIndex((h) => h !== null);
        const none = answers.findIndex((h) => h === null);
        throw new VotersDisagreeError(`RPC URL ${redactRpcUrl(voters[has].url)} has block ${number}, ${redactRpcUrl(voters[none].url)} has none`);
      }
      return agreed(`blocks ${number}`, headers, headerKey);
    },
    getLogs,
  };
}
