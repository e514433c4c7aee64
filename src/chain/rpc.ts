// One chain's JSON-RPC, as the payment detector uses it: viem over the chain's URLs (tried in
// order, `fallback`), requests batched, every call counted by method and outcome. A call fails
// fast (no retries here): the watcher backs off between runs instead.
import { createPublicClient, fallback, http, webSocket, type Log, type PublicClient, type Transport } from 'viem';
import type { Chain } from '../domain/chains.js';
import { ERC20_TRANSFER, TRANSFER_WITH_REFERENCE_AND_FEE } from './abi.js';

export type RpcOutcome = 'ok' | 'error' | 'range_refused';

export interface ChainRpc {
  blockNumber(): Promise<bigint>;
  block(number: bigint): Promise<{ number: bigint; hash: string; timestamp: bigint }>;
  proxyLogs(proxy: string, from: bigint, to: bigint): Promise<ProxyLog[]>;
  transferLogs(tokens: string[], recipients: string[], from: bigint, to: bigint): Promise<TransferLog[]>;
}

interface LogPosition {
  txHash: string;
  logIndex: number;
  blockNumber: bigint;
  blockHash: string;
  /** Some nodes put the block's time on its logs; else null (read from the block). */
  blockTimestamp: bigint | null;
}

export interface ProxyLog extends LogPosition {
  tokenAddress: string;
  to: string;
  amount: bigint;
  /** keccak256 of the reference's bytes: an indexed `bytes` is stored as its hash. */
  referenceTopic: string;
  feeAmount: bigint;
  feeAddress: string;
}

export interface TransferLog extends LogPosition {
  tokenAddress: string;
  from: string;
  to: string;
  value: bigint;
}

/** Recipients per eth_getLogs call: providers bound the topics of one filter. */
const RECIPIENTS_PER_CALL = 500;
const TIMEOUT_MS = 15_000;

/** A provider's refusal of a range or result size (as opposed to an outage): shrink and retry. */
export function isRangeRefusal(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && code <= -32000 && /range|too many|exceed|limit|results|size|too large|block/i.test(e.message)) return true;
    if (code === -32005) return true;
  }
  return false;
}

function transportOf(urls: string[]): Transport {
  const one = (url: string) =>
    url.startsWith('ws') ? webSocket(url, { retryCount: 0, timeout: TIMEOUT_MS }) : http(url, { retryCount: 0, timeout: TIMEOUT_MS, batch: { batchSize: 100, wait: 0 } });
  return urls.length === 1 ? one(urls[0]) : fallback(urls.map(one), { retryCount: 0 });
}

function position(log: Log): LogPosition {
  return {
    txHash: log.transactionHash!,
    logIndex: log.logIndex!,
    blockNumber: log.blockNumber!,
    blockHash: log.blockHash!,
    blockTimestamp: (log as { blockTimestamp?: bigint | string | null }).blockTimestamp != null ? BigInt((log as { blockTimestamp: bigint | string }).blockTimestamp) : null,
  };
}

export function createChainRpc(chain: Chain, count: (method: string, outcome: RpcOutcome) => void): ChainRpc {
  const client: PublicClient = createPublicClient({ transport: transportOf(chain.rpcUrls) });
  async function counted<T>(method: string, call: () => Promise<T>): Promise<T> {
    try {
      const result = await call();
      count(method, 'ok');
      return result;
    } catch (err) {
      count(method, isRangeRefusal(err) ? 'range_refused' : 'error');
      throw err;
    }
  }
  return {
    blockNumber: () => counted('eth_blockNumber', () => client.getBlockNumber({ cacheTime: 0 })),
    block: (number) =>
      counted('eth_getBlockByNumber', async () => {
        const b = await client.getBlock({ blockNumber: number });
        return { number: b.number, hash: b.hash, timestamp: b.timestamp };
      }),
    proxyLogs: (proxy, from, to) =>
      counted('eth_getLogs', async () => {
        const logs = await client.getLogs({ address: proxy as `0x${string}`, event: TRANSFER_WITH_REFERENCE_AND_FEE, fromBlock: from, toBlock: to, strict: true });
        return logs.map((l) => ({
          ...position(l),
          tokenAddress: l.args.tokenAddress,
          to: l.args.to,
          amount: l.args.amount,
          referenceTopic: l.args.paymentReference,
          feeAmount: l.args.feeAmount,
          feeAddress: l.args.feeAddress,
        }));
      }),
    async transferLogs(tokens, recipients, from, to) {
      const out: TransferLog[] = [];
      for (let i = 0; i < recipients.length; i += RECIPIENTS_PER_CALL) {
        const batch = recipients.slice(i, i + RECIPIENTS_PER_CALL) as `0x${string}`[];
        const logs = await counted('eth_getLogs', () =>
          client.getLogs({ address: tokens as `0x${string}`[], event: ERC20_TRANSFER, args: { to: batch }, fromBlock: from, toBlock: to, strict: true }),
        );
        for (const l of logs) out.push({ ...position(l), tokenAddress: l.address, from: l.args.from, to: l.args.to, value: l.args.value });
      }
      return out;
    },
  };
}
