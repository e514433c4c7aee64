// Issue 24, finding 6: a tenant must not claim the platform's own addresses as its settlement
// address. On a real chain fixture (anvil with the fee proxy and the test USDC, CHAINS_FILE naming
// them, account 9 the fee address), PATCH /v1/account with the fee address, the fee proxy or the
// token contract (in any case spelling), or an address of a built-in chain of the other
// environment, is refused with 409 settlement_address_reserved and leaves the address unchanged;
// an ordinary address is accepted.
import { getAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILT_IN_CHAINS } from '../../src/domain/chains.js';
import type { TestChain } from '../helpers/anvil.js';
import { startChainFixture, type ChainFixture } from '../helpers/chain-fixture.js';
import type { ApiFixture } from '../helpers/context.js';
import { apiClient, expectError } from '../helpers/http.js';

const MERCHANT = privateKeyToAccount(generatePrivateKey()).address;

describe('the platform\'s addresses are no tenant\'s settlement address', () => {
  let chain: TestChain;
  let fx: ApiFixture;
  const api = apiClient(() => fx.api.app);
  let fixture: ChainFixture | undefined;
  beforeAll(async () => {
    fixture = await startChainFixture({ settlementAddress: MERCHANT });
    ({ chain, fx } = fixture);
  }, 120_000);
  afterAll(async () => {
    await fixture?.close();
  });

  const currentAddress = async () => (await api.get('/v1/account', fx.merchant.keys.sandbox)).body.data.settlement_address;

  it('refuses the chain\'s fee address, its fee proxy and its token contract with 409 settlement_address_reserved', async () => {
    const claims: [string, string, RegExp][] = [
      ['fee address', chain.feeAddress, /fee address/],
      ['fee proxy', chain.feeProxy, /fee proxy/],
      ['token contract', chain.token, /USDC token contract/],
      ['fee address, lower case', chain.feeAddress.toLowerCase(), /fee address/],
      ['token contract, lower case', chain.token.toLowerCase(), /USDC token contract/],
    ];
    for (const [what, address, message] of claims) {
      const res = await api.patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: address });
      expectError(res, 409, 'invalid_request_error', 'settlement_address_reserved');
      expect(res.body.error.message, what).toContain('settlement_address');
      expect(res.body.error.message, what).toMatch(message);
      expect(res.body.error.message, what).toContain(`chain ${chain.chainId}`);
    }
    expect(await currentAddress()).toBe(MERCHANT);
  });

  it('refuses the addresses of every configured chain, whatever the key\'s environment', async () => {
    const ethereum = BUILT_IN_CHAINS.find((c) => c.chainId === 1)!;
    // A live chain's USDC and fee proxy from a sandbox key, the local chain's token from a live key.
    for (const [key, address] of [
      [fx.merchant.keys.sandbox, ethereum.tokens[0].address],
      [fx.merchant.keys.sandbox, ethereum.feeProxy!],
      [fx.merchant.keys.live, chain.token],
      [fx.merchant.keys.live, chain.feeAddress],
    ] as const) {
      expectError(await api.patch('/v1/account', key, { settlement_address: address }), 409, 'invalid_request_error', 'settlement_address_reserved');
    }
    expect((await api.get('/v1/account', fx.merchant.keys.live)).body.data.settlement_address).toBeNull();
  });

  it('accepts an ordinary address', async () => {
    const own = privateKeyToAccount(generatePrivateKey()).address;
    const res = await api.patch('/v1/account', fx.merchant.keys.sandbox, { settlement_address: own.toLowerCase() });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.data.settlement_address).toBe(getAddress(own));
  });
});
