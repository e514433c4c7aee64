// The deployment's own addresses (src/domain/chains.ts reservedAddresses): every fee address, fee
// proxy, token and subscription contract of every chain of the registry, in any case spelling.
import { describe, expect, it } from 'vitest';
import { BUILT_IN_CHAINS, mergeChains, reservedAddresses, reservedAddressUse } from '../../src/domain/chains.js';

const LOCAL = {
  chainId: 31337,
  network: 'local',
  environment: 'sandbox' as const,
  confirmations: 2,
  feeProxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  feeAddress: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
  tokens: [{ currency: 'USDC', address: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512', decimals: 6 }],
  subscriptionManager: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0',
};

describe('reservedAddresses', () => {
  const chains = mergeChains(BUILT_IN_CHAINS, [LOCAL]);

  it('names a configured chain\'s fee address, fee proxy and tokens, whatever the case', () => {
    expect(reservedAddressUse(chains, LOCAL.feeAddress.toLowerCase())).toEqual({ chainId: 31337, network: 'local', role: 'fee address' });
    expect(reservedAddressUse(chains, LOCAL.feeProxy.toUpperCase().replace('0X', '0x'))).toMatchObject({ chainId: 31337, role: 'fee proxy' });
    expect(reservedAddressUse(chains, LOCAL.tokens[0].address)).toMatchObject({ chainId: 31337, role: 'token contract', currency: 'USDC' });
  });

  it('covers every built-in chain of both environments, and a chain\'s subscription contract', () => {
    const reserved = reservedAddresses(chains);
    for (const c of BUILT_IN_CHAINS) {
      for (const t of c.tokens) expect(reserved.get(t.address.toLowerCase()), `${c.network} ${t.currency}`).toMatchObject({ chainId: c.chainId, role: 'token contract' });
      if (c.feeProxy) expect(reserved.get(c.feeProxy.toLowerCase())).toMatchObject({ chainId: c.chainId, role: 'fee proxy' });
    }
    expect(reservedAddressUse(chains, LOCAL.subscriptionManager.toLowerCase())).toMatchObject({ chainId: 31337, role: 'subscription contract' });
  });

  it('leaves any other address free', () => {
    expect(reservedAddressUse(chains, '0x4444444444444444444444444444444444444444')).toBeNull();
    // A chain without a fee address reserves no null.
    expect([...reservedAddresses(BUILT_IN_CHAINS).keys()].every((a) => /^0x[0-9a-f]{40}$/.test(a))).toBe(true);
  });
});
