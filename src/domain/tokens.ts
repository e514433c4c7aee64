// The (network, token) pairs the service accepts, read from the chains in use (chains.ts). Test
// chains serve the sandbox, production chains serve live; a key of one environment can never
// name a chain of the other.
import type { ChainRegistry } from './chains.js';
import type { Environment } from './environment.js';

export interface Token {
  network: string;
  currency: string;
  chainId: number;
  address: string;
  decimals: number;
  /** The chain's SubscriptionManager; null: the chain offers no subscriptions. */
  subscriptionManager: string | null;
}

/** The tokens of the chains in use (chains.ts), one entry per (network, currency). */
function tokensOf(chains: ChainRegistry, environment: Environment): Token[] {
  return chains
    .filter((c) => c.environment === environment)
    .flatMap((c) =>
      c.tokens.map((t) => ({
        network: c.network,
        currency: t.currency,
        chainId: c.chainId,
        address: t.address,
        decimals: t.decimals,
        subscriptionManager: c.subscriptionManager,
      })),
    );
}

export const DEFAULT_NETWORK: Record<Environment, string> = { sandbox: 'base-sepolia', live: 'base' };
export const DEFAULT_CURRENCY = 'USDC';

export type TokenLookup =
  | { ok: true; token: Token }
  | { ok: false; code: 'network_not_allowed' | 'unknown_network' | 'unsupported_token'; message: string };

/** Resolves a (network, currency) pair for an environment among `chains`, applying the defaults. */
export function resolveToken(chains: ChainRegistry, environment: Environment, network?: string, currency?: string): TokenLookup {
  const net = network ?? DEFAULT_NETWORK[environment];
  const cur = (currency ?? DEFAULT_CURRENCY).toUpperCase();
  const mine = tokensOf(chains, environment).filter((t) => t.network === net);
  if (mine.length === 0) {
    const other: Environment = environment === 'sandbox' ? 'live' : 'sandbox';
    if (tokensOf(chains, other).some((t) => t.network === net)) {
      return {
        ok: false,
        code: 'network_not_allowed',
        message: `Network ${net} is a ${other === 'live' ? 'production' : 'test'} chain; a ${environment} key can only use: ${networksOf(chains, environment).join(', ')}.`,
      };
    }
    return { ok: false, code: 'unknown_network', message: `Unknown network ${net}; expected one of: ${networksOf(chains, environment).join(', ')}.` };
  }
  const token = mine.find((t) => t.currency === cur);
  if (!token) {
    return { ok: false, code: 'unsupported_token', message: `Token ${cur} is not supported on ${net}; expected one of: ${mine.map((t) => t.currency).join(', ')}.` };
  }
  return { ok: true, token };
}

export function networksOf(chains: ChainRegistry, environment: Environment): string[] {
  return [...new Set(tokensOf(chains, environment).map((t) => t.network))];
}
