// The local chain's relayer (the operator of local subscriptions): `npm run chain` writes its key,
// mode 600, to relayer.key beside var/chain/chains.json, where the service finds it for chain 31337
// when no RELAYER_PRIVATE_KEY_FILE / RELAYER_PRIVATE_KEY_31337 is set (src/chain/relayer-keys.ts),
// and gives it gas. The account is derived from anvil's public mnemonic beyond the ten accounts
// anvil unlocks, so it is no payer, merchant or fee address, and the same on every run (a kept
// chain's subscriptions keep their operator).
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createPublicClient, createTestClient, http, parseEther, type Address } from 'viem';
import { foundry } from 'viem/chains';
import { LOCAL_RELAYER_KEY_FILE } from '../chain/relayer-keys.js';
import { ANVIL_ACCOUNT_COUNT, wellKnownAccount } from './accounts.js';

/** m/44'/60'/0'/0/10: the first account of the mnemonic anvil does not create. */
export const RELAYER_ACCOUNT_INDEX = ANVIL_ACCOUNT_COUNT;
/** Topped up to this at every start: gas for a great many charges. */
export const RELAYER_FUNDING_WEI = parseEther('1000');

export interface LocalRelayer {
  address: Address;
  keyFile: string;
}

/** Writes the key file beside `chainsFile` (mode 600, whatever it was) and tops the account up on the chain at rpcUrl. */
export async function prepareLocalRelayer(rpcUrl: string, chainsFile: string): Promise<LocalRelayer> {
  const account = wellKnownAccount(RELAYER_ACCOUNT_INDEX);
  const keyFile = path.join(path.dirname(chainsFile), LOCAL_RELAYER_KEY_FILE);
  writeFileSync(keyFile, `${account.privateKey}\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  const transport = http(rpcUrl);
  const balance = await createPublicClient({ transport }).getBalance({ address: account.address });
  if (balance < RELAYER_FUNDING_WEI) {
    await createTestClient({ chain: foundry, mode: 'anvil', transport }).setBalance({ address: account.address, value: RELAYER_FUNDING_WEI });
  }
  return { address: account.address, keyFile };
}
