// anvil's well-known test accounts: derived from the public "test test ... junk" mnemonic that
// anvil (and Hardhat) use by default. Their keys are public knowledge: never send real funds to them.
import { bytesToHex, getAddress, type Address, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';

export const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';

/** anvil creates 10 accounts by default (`--accounts`). */
export const ANVIL_ACCOUNT_COUNT = 10;

/** Deploys the contracts and mints: account 0. */
export const DEPLOYER_INDEX = 0;

/**
 * The platform's fee address on local chains: account 9. It is never a payer and is given no test
 * USDC, so its token balance is exactly the fees collected.
 */
export const FEE_ACCOUNT_INDEX = 9;

/**
 * The demo merchant's settlement address on local chains (`npm run demo`): account 8. It is never
 * a payer and is given no test USDC, so its token balance is exactly what it was paid.
 */
export const MERCHANT_ACCOUNT_INDEX = 8;

/** The funded payers: accounts 0 to 7 (every well-known account but the merchant and the fee address). */
export const PAYER_INDICES: readonly number[] = Array.from({ length: ANVIL_ACCOUNT_COUNT }, (_, i) => i).filter(
  (i) => i !== FEE_ACCOUNT_INDEX && i !== MERCHANT_ACCOUNT_INDEX,
);

export interface WellKnownAccount {
  index: number;
  address: Address;
  privateKey: Hex;
}

/** Account `index` of anvil's default mnemonic (m/44'/60'/0'/0/index), EIP-55 address. */
export function wellKnownAccount(index: number): WellKnownAccount {
  const account = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: index });
  const key = account.getHdKey().privateKey;
  if (key === null) throw new Error(`no private key derived for account ${index}`);
  return { index, address: getAddress(account.address), privateKey: bytesToHex(key) };
}

/** anvil's 10 default accounts, in order. */
export const WELL_KNOWN_ACCOUNTS: readonly WellKnownAccount[] = Array.from({ length: ANVIL_ACCOUNT_COUNT }, (_, i) => wellKnownAccount(i));
