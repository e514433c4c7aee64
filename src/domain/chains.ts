// The chains the service knows: the built-in ones (their tokens, Request Network's ERC20FeeProxy
// where it is deployed, and how many confirmations make a payment final), and those a deployment
// adds or overrides with CHAINS_FILE / RPC_URL_<chainId> (src/chains-config.ts). Test chains serve
// the sandbox, production chains serve live; a key of one environment never names a chain of the
// other. Pure, and holds no registry of its own: the chains in use (`ChainRegistry`, the config's
// `chains`, built once at start) are handed to whatever reads them, so two runtimes in one process
// never overwrite each other's.
import type { Environment } from './environment.js';

export interface ChainToken {
  currency: string;
  /** EIP-55 checksummed. */
  address: string;
  decimals: number;
}

export interface Chain {
  chainId: number;
  network: string;
  environment: Environment;
  /** Empty: not watched (invoices on it are still created and sent; nothing detects payments). */
  rpcUrls: string[];
  /** Blocks built on top of a payment's block before it counts: the safe head is head - confirmations. */
  confirmations: number;
  /** ERC20FeeProxy; null where none is deployed (no payment instructions, plain transfers only). */
  feeProxy: string | null;
  /** Where the proxy sends the platform's fee; null: no payment instructions on this chain. */
  feeAddress: string | null;
  /**
   * The platform's SubscriptionManager (contracts/SubscriptionManager.sol, deployed with
   * `npm run contracts:deploy`); null: no subscriptions on this chain. None is built in.
   */
  subscriptionManager: string | null;
  /** The first block worth scanning (the proxy's deployment). */
  startBlock: number;
  /** Base URL of a block explorer (`<url>/tx/<hash>`), or null. */
  explorerUrl: string | null;
  /**
   * An RPC URL the configuration marks public: the only one a payer's page may hand to a wallet
   * (to add the chain). Never one of `rpcUrls`, which often carry an API key. Null: none known.
   */
  publicRpcUrl: string | null;
  tokens: ChainToken[];
}

const usdc = (address: string): ChainToken => ({ currency: 'USDC', address, decimals: 6 });

/**
 * Default confirmations (docs/payments.md says why): Ethereum and Sepolia 12 blocks (~2.4 min;
 * reorgs past 2 blocks are rare since the merge, 12 is the custom of exchanges), Base and Base
 * Sepolia 20 blocks (~40 s; the sequencer's head only reorgs on a sequencer fault), Polygon and
 * Amoy 64 blocks (~2 min; Polygon PoS had reorgs of dozens of blocks before its milestones).
 */
// No SubscriptionManager is built in: the platform has deployed none yet (CHAINS_FILE names one).
export const BUILT_IN_CHAINS: readonly Chain[] = ([
  {
    chainId: 84532, network: 'base-sepolia', environment: 'sandbox', rpcUrls: [], confirmations: 20, feeProxy: null, feeAddress: null,
    startBlock: 0, explorerUrl: 'https://sepolia.basescan.org', publicRpcUrl: 'https://sepolia.base.org', tokens: [usdc('0x036CbD53842c5426634e7929541eC2318f3dCF7e')],
  },
  {
    chainId: 11155111, network: 'sepolia', environment: 'sandbox', rpcUrls: [], confirmations: 12,
    feeProxy: '0x399F5EE127ce7432E4921a61b8CF52b0af52cbfE', feeAddress: null, startBlock: 4733364, explorerUrl: 'https://sepolia.etherscan.io', publicRpcUrl: 'https://ethereum-sepolia-rpc.publicnode.com',
    tokens: [usdc('0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238'), { currency: 'DAI', address: '0x3e622317f8C93f7328350cF0B56d9eD4C620C5d6', decimals: 18 }],
  },
  {
    chainId: 80002, network: 'polygon-amoy', environment: 'sandbox', rpcUrls: [], confirmations: 64, feeProxy: null, feeAddress: null,
    startBlock: 0, explorerUrl: 'https://amoy.polygonscan.com', publicRpcUrl: 'https://rpc-amoy.polygon.technology', tokens: [usdc('0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582')],
  },
  {
    chainId: 8453, network: 'base', environment: 'live', rpcUrls: [], confirmations: 20,
    feeProxy: '0x1892196E80C4c17ea5100Da765Ab48c1fE2Fb814', feeAddress: null, startBlock: 10827274, explorerUrl: 'https://basescan.org', publicRpcUrl: 'https://mainnet.base.org',
    tokens: [usdc('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913')],
  },
  {
    chainId: 1, network: 'ethereum', environment: 'live', rpcUrls: [], confirmations: 12,
    feeProxy: '0x370DE27fdb7D1Ff1e1BaA7D11c5820a324Cf623C', feeAddress: null, startBlock: 10774767, explorerUrl: 'https://etherscan.io', publicRpcUrl: 'https://ethereum-rpc.publicnode.com',
    tokens: [
      usdc('0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'),
      { currency: 'USDT', address: '0xdAC17F958D2ee523a2206206994597C13D831ec7', decimals: 6 },
      { currency: 'DAI', address: '0x6B175474E89094C44Da98b954EedeAC495271d0F', decimals: 18 },
    ],
  },
  {
    chainId: 137, network: 'polygon', environment: 'live', rpcUrls: [], confirmations: 64,
    feeProxy: '0x2171a0dc12a9E5b1659feF2BB20E54c84Fa7dB0C', feeAddress: null, startBlock: 14163521, explorerUrl: 'https://polygonscan.com', publicRpcUrl: 'https://polygon-rpc.com',
    tokens: [usdc('0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359')],
  },
] satisfies Omit<Chain, 'subscriptionManager'>[]).map((c) => ({ ...c, subscriptionManager: null }));

/** What CHAINS_FILE (or RPC_URL_<chainId>) says of one chain: a whole new chain, or fields of a built-in one. */
export type ChainOverride = Partial<Omit<Chain, 'chainId'>> & { chainId: number };

/**
 * The built-in chains with the deployment's chains joined: a chain id already known takes the
 * given fields (and adds its tokens, a currency given again replacing the built-in one), a new one
 * must be complete. Throws RangeError naming the chain when the result is inconsistent.
 */
export function mergeChains(builtIn: readonly Chain[], overrides: readonly ChainOverride[]): Chain[] {
  const byId = new Map<number, Chain>(builtIn.map((c) => [c.chainId, { ...c, tokens: [...c.tokens] }]));
  for (const o of overrides) {
    const known = byId.get(o.chainId);
    if (known) {
      const tokens = [...known.tokens.filter((t) => !(o.tokens ?? []).some((n) => n.currency === t.currency)), ...(o.tokens ?? [])];
      byId.set(o.chainId, { ...known, ...definedFields(o), tokens });
      continue;
    }
    const missing = (['network', 'environment', 'confirmations', 'tokens'] as const).filter((k) => o[k] === undefined);
    if (missing.length > 0) throw new RangeError(`chain ${o.chainId} is not built in, so it needs ${missing.join(', ')}`);
    byId.set(o.chainId, {
      chainId: o.chainId,
      network: o.network!,
      environment: o.environment!,
      rpcUrls: o.rpcUrls ?? [],
      confirmations: o.confirmations!,
      feeProxy: o.feeProxy ?? null,
      feeAddress: o.feeAddress ?? null,
      subscriptionManager: o.subscriptionManager ?? null,
      startBlock: o.startBlock ?? 0,
      explorerUrl: o.explorerUrl ?? null,
      publicRpcUrl: o.publicRpcUrl ?? null,
      tokens: o.tokens!,
    });
  }
  const chains = [...byId.values()];
  const networks = new Map<string, number>();
  for (const c of chains) {
    const other = networks.get(c.network);
    if (other !== undefined) throw new RangeError(`chains ${other} and ${c.chainId} both use the network name ${c.network}`);
    networks.set(c.network, c.chainId);
    const currencies = new Set<string>();
    for (const t of c.tokens) {
      if (currencies.has(t.currency)) throw new RangeError(`chain ${c.chainId} lists the token ${t.currency} twice`);
      currencies.add(t.currency);
    }
  }
  return chains;
}

function definedFields(o: ChainOverride): Partial<Chain> {
  return Object.fromEntries(Object.entries(o).filter(([k, v]) => v !== undefined && k !== 'tokens')) as Partial<Chain>;
}

/**
 * The chains a deployment uses: the built-in ones joined with CHAINS_FILE and RPC_URL_<chainId>
 * (`config.chains`, built once from the configuration at start), handed down to every reader.
 */
export type ChainRegistry = readonly Chain[];

export function chainById(chains: ChainRegistry, chainId: number): Chain | undefined {
  return chains.find((c) => c.chainId === chainId);
}

/** A worker watches a chain when it has RPC URLs. */
export function isWatched(chain: Chain): boolean {
  return chain.rpcUrls.length > 0;
}

/** One readable line per watched chain, for start lines: "local (31337), 2 confirmations". */
export function describeWatched(chains: readonly Chain[]): string[] {
  return chains.filter(isWatched).map((c) => `${c.network} (${c.chainId}), ${c.confirmations} confirmations`);
}

/** What the deployment itself uses an address for on one of its chains. */
export type ReservedRole = 'fee address' | 'fee proxy' | 'token contract' | 'subscription contract';

export interface ReservedAddress {
  chainId: number;
  network: string;
  role: ReservedRole;
  /** The token's currency, for a token contract. */
  currency?: string;
}

/**
 * Every address the deployment itself uses on the given chains (all of them, whatever their
 * environment or whether they are watched): fee addresses, fee proxies, token contracts and the
 * subscription contracts. None may be a tenant's settlement address: money sent to it is the
 * platform's or a contract's, and the watcher would show other tenants' payments to it as the
 * claimant's. Keyed by lower-case address.
 */
export function reservedAddresses(chains: readonly Chain[]): Map<string, ReservedAddress> {
  const reserved = new Map<string, ReservedAddress>();
  const add = (address: string | null, entry: ReservedAddress) => {
    if (address !== null && !reserved.has(address.toLowerCase())) reserved.set(address.toLowerCase(), entry);
  };
  for (const c of chains) {
    const at = { chainId: c.chainId, network: c.network };
    add(c.feeAddress, { ...at, role: 'fee address' });
    add(c.feeProxy, { ...at, role: 'fee proxy' });
    for (const t of c.tokens) add(t.address, { ...at, role: 'token contract', currency: t.currency });
    add(c.subscriptionManager, { ...at, role: 'subscription contract' });
  }
  return reserved;
}

/** What the deployment uses the address for on one of the chains, or null when it is no address of its own. */
export function reservedAddressUse(chains: readonly Chain[], address: string): ReservedAddress | null {
  return reservedAddresses(chains).get(address.toLowerCase()) ?? null;
}

/** `<explorer>/tx/<hash>`, or null when the chain names no explorer (or is not one of `chains`). */
export function explorerTxUrl(chains: ChainRegistry, chainId: number, txHash: string): string | null {
  const url = chainById(chains, chainId)?.explorerUrl;
  return url ? `${url.replace(/\/+$/, '')}/tx/${txHash}` : null;
}

const NATIVE_SYMBOL: Record<number, string> = { 137: 'POL', 80002: 'POL' };
/** anvil's and Hardhat's chain id: a developer's own chain on their machine. */
export const LOCAL_CHAIN_ID = 31337;

/** What a browser wallet needs to switch to, or add, a chain. */
export interface WalletChain {
  chain_id: number;
  name: string;
  /** Null: no public URL is known; the payer adds the network to the wallet by hand. */
  rpc_url: string | null;
  explorer_url: string | null;
  native_symbol: string;
}

/**
 * The local development chain's own RPC URL may be shown: on the payer's own machine, a bare
 * loopback address. One with a path, a query or credentials may carry a key: never shown.
 */
function bareLoopbackUrl(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return null;
  }
  const loopback = u.hostname === 'localhost' || u.hostname === '127.0.0.1' || u.hostname === '[::1]';
  const bare = u.username === '' && u.password === '' && u.search === '' && u.hash === '' && u.pathname === '/';
  return loopback && bare ? raw : null;
}

/**
 * The chain as the payment page hands it to a wallet. The RPC URL is only ever one the
 * configuration marks public (`public_rpc_url`, or a built-in chain's known public endpoint), or
 * the local development chain's bare loopback URL; else none, and the wallet uses its own.
 */
export function walletChain(chain: Pick<Chain, 'chainId' | 'network' | 'rpcUrls' | 'explorerUrl' | 'publicRpcUrl'>): WalletChain {
  const rpc = chain.publicRpcUrl ?? (chain.chainId === LOCAL_CHAIN_ID ? bareLoopbackUrl(chain.rpcUrls[0]) : null);
  return { chain_id: chain.chainId, name: chain.network, rpc_url: rpc, explorer_url: chain.explorerUrl, native_symbol: NATIVE_SYMBOL[chain.chainId] ?? 'ETH' };
}

/**
 * What a chain cursor was scanned for: the logs a scan asks for (the fee proxy's events, the
 * tokens' transfers) and what decides how they count (the fee address, the environment whose
 * settlement addresses are watched). A worker configured differently reads other logs, so it may
 * not move a cursor another set has moved (docs/payments.md, "The watcher").
 */
export interface ScannedFor {
  environment: Environment;
  fee_proxy: string | null;
  fee_address: string | null;
  /** Token contracts, lower case, sorted. */
  tokens: string[];
  /** The subscription contract whose logs the scan reads (absent on cursors scanned before it was watched: none). */
  subscription_manager?: string | null;
}

export function scannedForOf(chain: Chain): ScannedFor {
  return {
    environment: chain.environment,
    fee_proxy: chain.feeProxy?.toLowerCase() ?? null,
    fee_address: chain.feeAddress?.toLowerCase() ?? null,
    tokens: [...new Set(chain.tokens.map((t) => t.address.toLowerCase()))].sort(),
    subscription_manager: chain.subscriptionManager?.toLowerCase() ?? null,
  };
}

/**
 * How a worker's set compares with the one a cursor was scanned for: `same`; `wider` (the same
 * proxy, fee address and environment, and every token of the cursor's among more: moving the
 * cursor skips nothing the cursor promised, so the wider set takes it over); or `other` (moving
 * the cursor would skip logs the cursor's set reads: refused).
 */
export function compareScannedFor(cursor: ScannedFor, mine: ScannedFor): 'same' | 'wider' | 'other' {
  if (cursor.environment !== mine.environment || cursor.fee_proxy !== mine.fee_proxy || cursor.fee_address !== mine.fee_address) return 'other';
  // A cursor scanned without the subscription contract is taken over by a set that reads it too
  // (as by one with more tokens); a set without it, or with another, would skip its logs.
  const cursorManager = cursor.subscription_manager ?? null;
  const myManager = mine.subscription_manager ?? null;
  if (cursorManager !== null && cursorManager !== myManager) return 'other';
  const have = new Set(mine.tokens);
  if (!cursor.tokens.every((t) => have.has(t))) return 'other';
  return mine.tokens.length === cursor.tokens.length && cursorManager === myManager ? 'same' : 'wider';
}

/** What differs, for the refusal's log line: "tokens 0xa..., 0xb... not watched by this worker". */
export function describeScannedForDifference(cursor: ScannedFor, mine: ScannedFor): string {
  const parts: string[] = [];
  if (cursor.environment !== mine.environment) parts.push(`environment ${cursor.environment} (this worker: ${mine.environment})`);
  if (cursor.fee_proxy !== mine.fee_proxy) parts.push(`fee proxy ${cursor.fee_proxy ?? 'none'} (this worker: ${mine.fee_proxy ?? 'none'})`);
  if (cursor.fee_address !== mine.fee_address) parts.push(`fee address ${cursor.fee_address ?? 'none'} (this worker: ${mine.fee_address ?? 'none'})`);
  const cursorManager = cursor.subscription_manager ?? null;
  if (cursorManager !== null && cursorManager !== (mine.subscription_manager ?? null)) {
    parts.push(`subscription manager ${cursorManager} (this worker: ${mine.subscription_manager ?? 'none'})`);
  }
  const missing = cursor.tokens.filter((t) => !mine.tokens.includes(t));
  if (missing.length > 0) parts.push(`tokens ${missing.join(', ')} (not watched by this worker)`);
  return parts.join('; ');
}
