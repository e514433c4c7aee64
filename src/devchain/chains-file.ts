// The CHAINS_FILE entry of a local chain (the format the chain watcher reads: a JSON array of
// chains). Written by `npm run chain` to var/chain/chains.json and by the test harness.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { getAddress, isAddress, type Address } from 'viem';
import { WELL_KNOWN_ACCOUNTS, FEE_ACCOUNT_INDEX } from './accounts.js';
import { TEST_USDC_SYMBOL } from './contracts.js';
import type { DevChainContracts } from './deploy.js';
import { LOCAL_CHAIN_ID } from '../domain/chains.js';
import { chainsFileProblem, type ChainsFileChain } from '../chains-config.js';

/** Confirmations on a local chain: enough to see "confirming 1 of 2", few enough to wait 2 s at one block a second. */
export const LOCAL_CONFIRMATIONS = 2;

/**
 * One chain of a CHAINS_FILE as a local chain's is written: every field of the format (its one
 * schema, `ChainsFileChain` in src/chains-config.ts, which the reader validates against) but the
 * RPC URL a payer's wallet may be given (the local chain's bare URL is shown anyway).
 */
export type ChainsFileEntry = Required<Omit<ChainsFileChain, 'public_rpc_url'>> & Pick<ChainsFileChain, 'public_rpc_url'>;

export interface LocalChain extends DevChainContracts {
  rpcUrl: string;
  chainId?: number;
  /** Default: well-known account 9 (FEE_ACCOUNT_INDEX), never a payer. */
  feeAddress?: Address;
}

/** The entry for a local chain: network `local`, environment `sandbox`, EIP-55 addresses; overrides win. */
export function localChainsFileEntry(chain: LocalChain, overrides: Partial<ChainsFileEntry> = {}): ChainsFileEntry {
  return {
    chain_id: chain.chainId ?? LOCAL_CHAIN_ID,
    network: 'local',
    environment: 'sandbox',
    rpc_urls: [chain.rpcUrl],
    confirmations: LOCAL_CONFIRMATIONS,
    fee_proxy: getAddress(chain.feeProxy),
    fee_address: getAddress(chain.feeAddress ?? WELL_KNOWN_ACCOUNTS[FEE_ACCOUNT_INDEX].address),
    subscription_manager: getAddress(chain.subscriptionManager),
    start_block: 0,
    explorer_url: null,
    tokens: [{ currency: TEST_USDC_SYMBOL, address: getAddress(chain.token), decimals: chain.tokenDecimals }],
    ...overrides,
  };
}

/** Writes the file (a JSON array) atomically: a reader never sees half of it. */
export function writeChainsFile(file: string, entries: readonly ChainsFileEntry[]): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(entries, null, 2)}\n`);
  renameSync(tmp, file);
}

/** What a previous run wrote: the manager is null in a file written before it was deployed. */
export interface KeptContracts extends Omit<DevChainContracts, 'subscriptionManager'> {
  subscriptionManager: Address | null;
}

/**
 * The local chain's contracts as a previous run wrote them, or null when the file is missing,
 * unreadable or has no entry for chainId (then the chain is deployed afresh).
 */
export function readLocalContracts(file: string, chainId: number = LOCAL_CHAIN_ID): KeptContracts | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
  if (chainsFileProblem(parsed) !== null) return null;
  const entry = (parsed as ChainsFileChain[]).find((e) => e.chain_id === chainId);
  const token = entry?.tokens?.find((t) => t.currency === TEST_USDC_SYMBOL);
  const feeProxy = entry?.fee_proxy;
  if (!token || !feeProxy || !isAddress(feeProxy) || !isAddress(token.address)) return null;
  const manager = entry.subscription_manager;
  return {
    feeProxy: getAddress(feeProxy),
    token: getAddress(token.address),
    tokenDecimals: token.decimals,
    subscriptionManager: manager && isAddress(manager) ? getAddress(manager) : null,
  };
}
