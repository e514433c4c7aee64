// The registry of (network, token) pairs the service accepts. Test chains serve the sandbox,
// production chains serve live; a key of one environment can never name a chain of the other.
import type { Environment } from './environment.js';

export interface Token {
  network: string;
  currency: string;
  chainId: number;
  address: string;
  decimals: number;
  /** Subscription contract the platform deployed on that chain. */
  subscriptionContract: string;
}

const SANDBOX: Token[] = [
  { network: 'base-sepolia', currency: 'USDC', chainId: 84532, address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', decimals: 6, subscriptionContract: '0x5e1b0b0A8e5ce4C9E8B1f6C1a3B3a1d8d2F0c001' },
  { network: 'sepolia', currency: 'USDC', chainId: 11155111, address: '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238', decimals: 6, subscriptionContract: '0x5e1b0b0A8e5ce4C9E8B1f6C1a3B3a1d8d2F0c002' },
  { network: 'sepolia', currency: 'DAI', chainId: 11155111, address: '0x3e622317f8C93f7328350cF0B56d9eD4C620C5d6', decimals: 18, subscriptionContract: '0x5e1b0b0A8e5ce4C9E8B1f6C1a3B3a1d8d2F0c002' },
  { network: 'polygon-amoy', currency: 'USDC', chainId: 80002, address: '0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', decimals: 6, subscriptionContract: '0x5e1b0b0A8e5ce4C9E8B1f6C1a3B3a1d8d2F0c003' },
];

const LIVE: Token[] = [
  { network: 'base', currency: 'USDC', chainId: 8453, address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', decimals: 6, subscriptionContract: '0x7a3F0d3c4B2e1A9c8D7e6F5a4B3c2D1e0F9a8001' },
  { network: 'ethereum', currency: 'USDC', chainId: 1, address: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', decimals: 6, subscriptionContract: '0x7a3F0d3c4B2e1A9c8D7e6F5a4B3c2D1e0F9a8002' },
  { network: 'ethereum', currency: 'USDT', chainId: 1, address: '0xdAC17F958D2ee523a2206206994597C13D831ec7', decimals: 6, subscriptionContract: '0x7a3F0d3c4B2e1A9c8D7e6F5a4B3c2D1e0F9a8002' },
  { network: 'ethereum', currency: 'DAI', chainId: 1, address: '0x6B175474E89094C44Da98b954EedeAC495271d0F', decimals: 18, subscriptionContract: '0x7a3F0d3c4B2e1A9c8D7e6F5a4B3c2D1e0F9a8002' },
  { network: 'polygon', currency: 'USDC', chainId: 137, address: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', decimals: 6, subscriptionContract: '0x7a3F0d3c4B2e1A9c8D7e6F5a4B3c2D1e0F9a8003' },
];

const REGISTRY: Record<Environment, Token[]> = { sandbox: SANDBOX, live: LIVE };
export const DEFAULT_NETWORK: Record<Environment, string> = { sandbox: 'base-sepolia', live: 'base' };
export const DEFAULT_CURRENCY = 'USDC';

export type TokenLookup =
  | { ok: true; token: Token }
  | { ok: false; code: 'network_not_allowed' | 'unknown_network' | 'unsupported_token'; message: string };

/** Resolves a (network, currency) pair for an environment, applying the defaults. */
export function resolveToken(environment: Environment, network?: string, currency?: string): TokenLookup {
  const net = network ?? DEFAULT_NETWORK[environment];
  const cur = (currency ?? DEFAULT_CURRENCY).toUpperCase();
  const mine = REGISTRY[environment].filter((t) => t.network === net);
  if (mine.length === 0) {
    const other: Environment = environment === 'sandbox' ? 'live' : 'sandbox';
    if (REGISTRY[other].some((t) => t.network === net)) {
      return {
        ok: false,
        code: 'network_not_allowed',
        message: `Network ${net} is a ${other === 'live' ? 'production' : 'test'} chain; a ${environment} key can only use: ${networksOf(environment).join(', ')}.`,
      };
    }
    return { ok: false, code: 'unknown_network', message: `Unknown network ${net}; expected one of: ${networksOf(environment).join(', ')}.` };
  }
  const token = mine.find((t) => t.currency === cur);
  if (!token) {
    return { ok: false, code: 'unsupported_token', message: `Token ${cur} is not supported on ${net}; expected one of: ${mine.map((t) => t.currency).join(', ')}.` };
  }
  return { ok: true, token };
}

export function networksOf(environment: Environment): string[] {
  return [...new Set(REGISTRY[environment].map((t) => t.network))];
}
