// A real local chain for the tests and benchmarks: anvil on a free port (automine unless a block
// time is given), the fee proxy and the 6-decimal test USDC deployed, payers funded; and
// startRpcProxy, a real JSON-RPC proxy in front of it that counts calls, can go down, and refuses
// wide eth_getLogs ranges as hosted providers do.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  http,
  maxUint256,
  parseEventLogs,
  rpcSchema,
  type Address,
  type Hash,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem';
import { foundry } from 'viem/chains';
import { FEE_ACCOUNT_INDEX, PAYER_INDICES, WELL_KNOWN_ACCOUNTS, type WellKnownAccount } from '../../src/devchain/accounts.js';
import { startAnvil, type AnvilProcess } from '../../src/devchain/anvil.js';
import { LOCAL_CHAIN_ID } from '../../src/domain/chains.js';
import { localChainsFileEntry, writeChainsFile, type ChainsFileEntry } from '../../src/devchain/chains-file.js';
import { FEE_PROXY_ABI } from '../../src/chain/abi.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { DEFAULT_MINT_ATOMIC, deployDevContracts } from '../../src/devchain/deploy.js';

/** Receipts and filters are polled this often (viem's HTTP default is 4 s). */
const POLL_MS = 50;
/**
 * No caching of eth_blockNumber: viem otherwise answers getBlockNumber from a cache as old as the
 * polling interval, and a test that mines then reads the head would see the old one.
 */
const CACHE_TIME_MS = 0;
/** Gas for a proxy payment sent in the same block as its approve (no estimate possible before the approve is mined). */
const PAY_GAS_AFTER_APPROVE = 300_000n;

/** anvil's own methods that viem's test actions do not cover. */
type AnvilExtraRpc = [
  /** Replaces the last `depth` blocks with new ones (holding the given transactions, here none). */
  { Method: 'anvil_reorg'; Parameters: [depth: number, txBlockPairs: [Hex, number][]]; ReturnType: null },
];

export interface PaymentResult {
  txHash: Hash;
  blockNumber: bigint;
  /** Index in its block of the payment's log: TransferWithReferenceAndFee, or the token's Transfer. */
  logIndex: number;
}

export interface PayWithReferenceInput {
  /** Default: payers[0]. Any unlocked account of the node (the well-known accounts are). */
  from?: Address;
  to: Address;
  amountAtomic: bigint;
  feeAtomic: bigint;
  /** Default: the chain's fee address (well-known account 9). */
  feeAddress?: Address;
  /** The payment reference, `0x` + 16 hex (8 bytes). */
  reference: Hex;
  /** Default: the test USDC. */
  token?: Address;
}

export interface TransferInput {
  from?: Address;
  to: Address;
  amountAtomic: bigint;
  token?: Address;
}

export interface TestChain {
  rpcUrl: string;
  chainId: number;
  feeProxy: Address;
  token: Address;
  tokenDecimals: number;
  /** The SubscriptionManager (contracts/SubscriptionManager.sol), deployed by account 0 after the token. */
  subscriptionManager: Address;
  /** Well-known account 9: receives the fees, holds no test USDC of its own. */
  feeAddress: Address;
  /** Well-known accounts 0 to 7, each funded with DEFAULT_MINT_ATOMIC test USDC (and anvil's 10,000 ETH). */
  payers: readonly WellKnownAccount[];
  publicClient: PublicClient;
  testClient: ReturnType<typeof createTestChainClients>['testClient'];
  anvil: AnvilProcess;
  /** Mines `blocks` blocks at once (anvil_mine). */
  mine(blocks?: number): Promise<void>;
  /** evm_snapshot: an id to revert to. */
  snapshot(): Promise<Hex>;
  /** evm_revert: back to the snapshot (blocks after it are gone; the id is used up). */
  revert(id: Hex): Promise<void>;
  /**
   * anvil_reorg: the last `depth` blocks are replaced by as many empty blocks with new hashes; the
   * transactions they held (and their logs) are gone, not returned to the pool. The head number is unchanged.
   */
  reorg(depth: number): Promise<void>;
  /** Approves the proxy (max) when the allowance is short, then transferFromWithReferenceAndFee; waits for the receipt. */
  payWithReference(input: PayWithReferenceInput): Promise<PaymentResult>;
  /** A plain ERC-20 transfer; waits for the receipt. */
  transfer(input: TransferInput): Promise<PaymentResult>;
  /** The test USDC balance of an address, atomic units. */
  balanceOf(address: Address, token?: Address): Promise<bigint>;
  /** This chain's CHAINS_FILE entry (network local, sandbox, confirmations 2), overrides applied. */
  chainsFileEntry(overrides?: Partial<ChainsFileEntry>): ChainsFileEntry;
  /** Writes `<dir>/chains.json` holding chainsFileEntry(overrides); returns its path. */
  writeChainsFile(dir: string, overrides?: Partial<ChainsFileEntry>): string;
  /** Stops anvil (idempotent). */
  stop(): Promise<void>;
}

function createTestChainClients(rpcUrl: string) {
  const chain = { ...foundry, rpcUrls: { default: { http: [rpcUrl] } } };
  const transport = http(rpcUrl);
  return {
    publicClient: createPublicClient({ chain, transport, pollingInterval: POLL_MS, cacheTime: CACHE_TIME_MS }) as PublicClient,
    testClient: createTestClient({ chain, mode: 'anvil', transport, pollingInterval: POLL_MS, cacheTime: CACHE_TIME_MS, rpcSchema: rpcSchema<AnvilExtraRpc>() }),
    walletClient: createWalletClient({ chain, transport, pollingInterval: POLL_MS }),
  };
}

/** Starts anvil on a free port, deploys and funds; `blockTime` (seconds) switches automine off for interval mining. */
export async function startTestChain(opts: { blockTime?: number } = {}): Promise<TestChain> {
  const anvil = await startAnvil({ port: 0, chainId: LOCAL_CHAIN_ID, blockTime: opts.blockTime });
  try {
    return await prepareTestChain(anvil);
  } catch (err) {
    await anvil.stop();
    throw err;
  }
}

async function prepareTestChain(anvil: AnvilProcess): Promise<TestChain> {
  const { rpcUrl } = anvil;
  const contracts = await deployDevContracts(rpcUrl, { mintAtomic: DEFAULT_MINT_ATOMIC });
  const { publicClient, testClient, walletClient } = createTestChainClients(rpcUrl);
  const payers = PAYER_INDICES.map((i) => WELL_KNOWN_ACCOUNTS[i]);
  const feeAddress = WELL_KNOWN_ACCOUNTS[FEE_ACCOUNT_INDEX].address;

  const receiptOf = async (hash: Hash): Promise<TransactionReceipt> => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: POLL_MS, timeout: 60_000 });
    if (receipt.status !== 'success') throw new Error(`transaction ${hash} reverted`);
    return receipt;
  };

  const payWithReference = async (input: PayWithReferenceInput): Promise<PaymentResult> => {
    const from = input.from ?? payers[0].address;
    const token = input.token ?? contracts.token;
    const total = input.amountAtomic + input.feeAtomic;
    const allowance = await publicClient.readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'allowance', args: [from, contracts.feeProxy] });
    let approved = false;
    if (allowance < total) {
      await walletClient.writeContract({ account: from, chain: null, address: token, abi: TEST_USDC_ABI, functionName: 'approve', args: [contracts.feeProxy, maxUint256] });
      approved = true;
    }
    // Right after an approve not yet mined (interval mining) no gas estimate can succeed: the gas
    // is given, and the two transactions land in the same block in nonce order.
    const hash = await walletClient.writeContract({
      account: from,
      chain: null,
      address: contracts.feeProxy,
      abi: FEE_PROXY_ABI,
      functionName: 'transferFromWithReferenceAndFee',
      args: [token, input.to, input.amountAtomic, input.reference, input.feeAtomic, input.feeAddress ?? feeAddress],
      ...(approved ? { gas: PAY_GAS_AFTER_APPROVE } : {}),
    });
    const receipt = await receiptOf(hash);
    const [log] = parseEventLogs({ abi: FEE_PROXY_ABI, eventName: 'TransferWithReferenceAndFee', logs: receipt.logs });
    if (!log) throw new Error(`payment ${hash}: no TransferWithReferenceAndFee log`);
    return { txHash: hash, blockNumber: receipt.blockNumber, logIndex: log.logIndex };
  };

  const transfer = async (input: TransferInput): Promise<PaymentResult> => {
    const hash = await walletClient.writeContract({
      account: input.from ?? payers[0].address,
      chain: null,
      address: input.token ?? contracts.token,
      abi: TEST_USDC_ABI,
      functionName: 'transfer',
      args: [input.to, input.amountAtomic],
    });
    const receipt = await receiptOf(hash);
    const [log] = parseEventLogs({ abi: TEST_USDC_ABI, eventName: 'Transfer', logs: receipt.logs });
    if (!log) throw new Error(`transfer ${hash}: no Transfer log`);
    return { txHash: hash, blockNumber: receipt.blockNumber, logIndex: log.logIndex };
  };

  const chainsFileEntry = (overrides: Partial<ChainsFileEntry> = {}) =>
    localChainsFileEntry({ rpcUrl, chainId: anvil.chainId, ...contracts, feeAddress }, overrides);

  return {
    rpcUrl,
    chainId: anvil.chainId,
    ...contracts,
    feeAddress,
    payers,
    publicClient,
    testClient,
    anvil,
    mine: (blocks = 1) => testClient.mine({ blocks }),
    snapshot: () => testClient.snapshot(),
    revert: (id) => testClient.revert({ id }),
    reorg: async (depth) => {
      await testClient.request({ method: 'anvil_reorg', params: [depth, []] });
    },
    payWithReference,
    transfer,
    balanceOf: (address, token = contracts.token) => publicClient.readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [address] }),
    chainsFileEntry,
    writeChainsFile: (dir, overrides) => {
      const file = path.join(dir, 'chains.json');
      writeChainsFile(file, [chainsFileEntry(overrides)]);
      return file;
    },
    stop: () => anvil.stop(),
  };
}

// ---------------------------------------------------------------------------------------------
// The RPC proxy

export interface RpcProxy {
  url: string;
  port: number;
  /** Requests received for `method` (each item of a batch counts), refused ones included; no method: all. */
  calls(method?: string): number;
  /** eth_getLogs requests refused for their range. */
  refusedLogRanges(): number;
  resetCalls(): void;
  /**
   * Takes the provider down: 'refuse' (default) closes the port and cuts the open connections,
   * so requests fail at the socket (ECONNREFUSED, or "other side closed" on a kept-alive
   * connection); 'http503' keeps it open and answers every request 503; 'http429' answers 429
   * Too Many Requests, as a provider's rate limit does.
   */
  down(mode?: 'refuse' | 'http503' | 'http429'): Promise<void>;
  /** Back up on the same port. */
  up(): Promise<void>;
  /**
   * Plays a lying or lagging node: `fn` sees each request (each item of a batch) with a way to get
   * the node's own answer, and returns the answer to give, or undefined to pass it on. null: stop.
   */
  rewrite(fn: RpcRewrite | null): void;
  close(): Promise<void>;
}

export type RpcRewrite = (req: JsonRpcRequest, real: () => Promise<JsonRpcResponse>) => Promise<JsonRpcResponse | undefined> | JsonRpcResponse | undefined;

export interface JsonRpcRequest {
  jsonrpc?: string;
  id?: number | string | null;
  method?: string;
  params?: unknown[];
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: unknown;
  /** Anything else a node adds (a test pads an answer with it). */
  [extra: string]: unknown;
  error?: { code: number; message: string };
}

/**
 * A JSON-RPC proxy on 127.0.0.1 in front of targetUrl. With maxLogRange, an eth_getLogs whose
 * block range (inclusive: from 0 to 49 is 50 blocks) is wider is answered, like hosted providers,
 * with `{"code":-32005,"message":"query exceeds max block range <n>"}` (HTTP 200); in a batch
 * only that item is refused, the others are forwarded.
 */
export async function startRpcProxy(targetUrl: string, opts: { maxLogRange?: number } = {}): Promise<RpcProxy> {
  const counts = new Map<string, number>();
  let refused = 0;
  let mode: 'up' | 'refuse' | 'http503' | 'http429' = 'up';
  let rewriter: RpcRewrite | null = null;
  const sockets = new Set<Socket>();

  const forward = async (body: string): Promise<string> => {
    const res = await fetch(targetUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return res.text();
  };
  const headBlock = async (): Promise<bigint> => {
    const answer = JSON.parse(await forward(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'eth_blockNumber', params: [] }))) as JsonRpcResponse;
    return BigInt(answer.result as string);
  };
  const blockOf = async (tag: unknown, head: () => Promise<bigint>): Promise<bigint> => {
    if (typeof tag === 'string' && tag.startsWith('0x')) return BigInt(tag);
    if (tag === 'earliest') return 0n;
    return head(); // latest, safe, finalized, pending, or absent
  };
  /** The refusal for an eth_getLogs wider than maxLogRange, or null to forward it. */
  const refusal = async (req: JsonRpcRequest, head: () => Promise<bigint>): Promise<JsonRpcResponse | null> => {
    if (opts.maxLogRange === undefined || req.method !== 'eth_getLogs') return null;
    const filter = (req.params?.[0] ?? {}) as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
    if (filter.blockHash !== undefined) return null;
    const from = await blockOf(filter.fromBlock, head);
    const to = await blockOf(filter.toBlock, head);
    if (to - from + 1n <= BigInt(opts.maxLogRange)) return null;
    refused += 1;
    return { jsonrpc: '2.0', id: req.id ?? null, error: { code: -32005, message: `query exceeds max block range ${opts.maxLogRange}` } };
  };

  const answer = async (raw: string): Promise<string> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return forward(raw); // the node answers a parse error itself
    }
    const batch = Array.isArray(parsed);
    const items = (batch ? parsed : [parsed]) as JsonRpcRequest[];
    for (const item of items) counts.set(String(item.method), (counts.get(String(item.method)) ?? 0) + 1);
    let head: Promise<bigint> | null = null;
    const headOnce = () => (head ??= headBlock());
    const refusals = await Promise.all(
      items.map(async (item) => {
        const own = rewriter ? await rewriter(item, async () => JSON.parse(await forward(JSON.stringify(item))) as JsonRpcResponse) : undefined;
        return own ?? refusal(item, headOnce);
      }),
    );
    if (refusals.every((r) => r === null)) return forward(raw);
    if (!batch) return JSON.stringify(refusals[0]);
    const passing = items.filter((_, i) => refusals[i] === null);
    const forwarded = passing.length > 0 ? (JSON.parse(await forward(JSON.stringify(passing))) as JsonRpcResponse[]) : [];
    const byId = new Map(forwarded.map((r) => [r.id, r]));
    return JSON.stringify(items.map((item, i) => refusals[i] ?? byId.get(item.id ?? null)));
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (mode === 'http503' || mode === 'http429') {
        res.writeHead(mode === 'http503' ? 503 : 429, { 'content-type': 'text/plain' }).end(mode === 'http503' ? 'service unavailable' : 'too many requests');
        return;
      }
      answer(Buffer.concat(chunks).toString('utf8')).then(
        (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(body),
        (err: unknown) => res.writeHead(502, { 'content-type': 'text/plain' }).end(`proxy: ${(err as Error).message}`),
      );
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const closeServer = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Keep-alive connections would otherwise keep answering while "down".
      for (const socket of sockets) socket.destroy();
    });

  await listen(0);
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls: (method) => (method === undefined ? [...counts.values()].reduce((a, b) => a + b, 0) : (counts.get(method) ?? 0)),
    refusedLogRanges: () => refused,
    resetCalls: () => {
      counts.clear();
      refused = 0;
    },
    down: async (how = 'refuse') => {
      if (mode !== 'up') throw new Error('rpc proxy: already down');
      mode = how;
      if (how === 'refuse') await closeServer();
    },
    rewrite: (fn) => {
      rewriter = fn;
    },
    up: async () => {
      if (mode === 'refuse') await listen(port);
      mode = 'up';
    },
    close: async () => {
      if (mode !== 'refuse') await closeServer();
      mode = 'refuse';
    },
  };
}
