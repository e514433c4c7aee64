import { describe, expect, it } from 'vitest';
import { BUILT_IN_CHAINS } from '../../src/domain/chains.js';
import type { Environment } from '../../src/domain/environment.js';
import { DEFAULT_CURRENCY, DEFAULT_NETWORK, networksOf as networksAmong, resolveToken as resolveAmong } from '../../src/domain/tokens.js';

// The built-in chains, handed in as every caller hands in its deployment's.
const resolveToken = (environment: Environment, network?: string, currency?: string) => resolveAmong(BUILT_IN_CHAINS, environment, network, currency);
const networksOf = (environment: Environment) => networksAmong(BUILT_IN_CHAINS, environment);

const token = (...args: Parameters<typeof resolveToken>) => {
  const r = resolveToken(...args);
  if (!r.ok) throw new Error(`${r.code}: ${r.message}`);
  return r.token;
};

describe('resolveToken', () => {
  it('defaults to USDC on base-sepolia (sandbox) and base (live)', () => {
    expect(DEFAULT_CURRENCY).toBe('USDC');
    expect(DEFAULT_NETWORK).toEqual({ sandbox: 'base-sepolia', live: 'base' });
    expect(token('sandbox')).toMatchObject({ network: 'base-sepolia', currency: 'USDC', chainId: 84532, decimals: 6 });
    expect(token('live')).toMatchObject({ network: 'base', currency: 'USDC', chainId: 8453, decimals: 6 });
  });

  it('resolves 6- and 18-decimal tokens on sepolia, case-insensitively for the currency', () => {
    expect(token('sandbox', 'sepolia', 'USDC')).toMatchObject({ chainId: 11155111, decimals: 6 });
    expect(token('sandbox', 'sepolia', 'dai')).toMatchObject({ currency: 'DAI', chainId: 11155111, decimals: 18 });
    expect(token('live', 'ethereum', 'DAI')).toMatchObject({ chainId: 1, decimals: 18 });
    expect(token('live', 'ethereum', 'usdt')).toMatchObject({ currency: 'USDT', decimals: 6 });
  });

  it('every token has a 0x address; no built-in chain names a SubscriptionManager (none is deployed yet)', () => {
    for (const env of ['sandbox', 'live'] as const) {
      for (const net of networksOf(env)) {
        const t = token(env, net);
        expect(t.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
        expect(t.subscriptionManager).toBeNull();
      }
    }
  });

  it('keeps the environments apart: a chain of the other one is network_not_allowed', () => {
    for (const net of networksOf('live')) {
      const r = resolveToken('sandbox', net);
      expect(r.ok ? 'ok' : r.code).toBe('network_not_allowed');
    }
    for (const net of networksOf('sandbox')) {
      const r = resolveToken('live', net);
      expect(r.ok ? 'ok' : r.code).toBe('network_not_allowed');
    }
    const r = resolveToken('sandbox', 'ethereum');
    expect(!r.ok && r.message).toContain('base-sepolia');
  });

  it('no network is in both environments', () => {
    const sandbox = new Set(networksOf('sandbox'));
    expect(networksOf('live').filter((n) => sandbox.has(n))).toEqual([]);
    expect(networksOf('sandbox').sort()).toEqual(['base-sepolia', 'polygon-amoy', 'sepolia']);
    expect(networksOf('live').sort()).toEqual(['base', 'ethereum', 'polygon']);
  });

  it('unknown networks and unsupported tokens are refused', () => {
    const unknown = resolveToken('sandbox', 'solana');
    expect(unknown.ok ? 'ok' : unknown.code).toBe('unknown_network');
    const wrongCase = resolveToken('sandbox', 'Base-Sepolia');
    expect(wrongCase.ok ? 'ok' : wrongCase.code).toBe('unknown_network');
    const dai = resolveToken('sandbox', 'base-sepolia', 'DAI');
    expect(dai.ok ? 'ok' : dai.code).toBe('unsupported_token');
    const usdt = resolveToken('sandbox', undefined, 'USDT');
    expect(usdt.ok ? 'ok' : usdt.code).toBe('unsupported_token');
  });
});
