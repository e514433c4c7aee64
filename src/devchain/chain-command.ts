// `npm run chain` (main/chain.ts): a local chain for development and demos. What it reads
// (CHAIN_PORT, CHAIN_STATE_DIR, `--fresh`) and the one block it prints live here, as plain
// functions the unit tests call; the entrypoint owns the process.
import path from 'node:path';
import type { Address, Hex } from 'viem';

export const DEFAULT_CHAIN_PORT = 8545;
export const DEFAULT_CHAIN_STATE_DIR = 'var/chain';
/** anvil's state (blocks, accounts, contracts), loaded at start and written on exit. */
export const STATE_FILE = 'state.json';
/** The CHAINS_FILE of the local chain. */
export const CHAINS_FILE_NAME = 'chains.json';
/** One block a second: confirmations advance as on a real chain. */
export const CHAIN_BLOCK_TIME_SECONDS = 1;

export interface ChainCommandOptions {
  port: number;
  stateDir: string;
  statePath: string;
  chainsFile: string;
  /** Delete the state and the chains file first: a new chain from block 0. */
  fresh: boolean;
}

/** A bad variable or argument: main/chain.ts prints the message as one line and exits 1. */
export class ChainCommandError extends Error {}

/** Reads CHAIN_PORT (default 8545), CHAIN_STATE_DIR (default var/chain) and the arguments (`--fresh`). */
export function chainCommandOptions(env: Readonly<Record<string, string | undefined>>, args: readonly string[]): ChainCommandOptions {
  const rawPort = env.CHAIN_PORT?.trim();
  let port = DEFAULT_CHAIN_PORT;
  if (rawPort !== undefined && rawPort !== '') {
    port = Number(rawPort);
    if (!/^\d+$/.test(rawPort) || port < 1 || port > 65_535) {
      throw new ChainCommandError(`CHAIN_PORT must be a port number (1 to 65535), got "${env.CHAIN_PORT}"`);
    }
  }
  const stateDir = env.CHAIN_STATE_DIR?.trim() || DEFAULT_CHAIN_STATE_DIR;
  let fresh = false;
  for (const arg of args) {
    if (arg === '--fresh') fresh = true;
    else throw new ChainCommandError(`unknown argument "${arg}" (usage: npm run chain [-- --fresh])`);
  }
  return { port, stateDir, statePath: path.join(stateDir, STATE_FILE), chainsFile: path.join(stateDir, CHAINS_FILE_NAME), fresh };
}

export interface ChainReadyInfo {
  rpcUrl: string;
  chainId: number;
  chainsFile: string;
  stateDir: string;
  /** 'deployed': contracts deployed by this run; 'kept': found on the chain from an earlier run. */
  contracts: 'deployed' | 'kept';
  blockNumber: bigint;
  token: Address;
  tokenDecimals: number;
  feeProxy: Address;
  feeAddress: Address;
  subscriptionManager: Address;
  /** The service's relayer here (the operator of local subscriptions) and its key file. */
  relayer: { address: Address; keyFile: string };
  /** Where `npm run demo` has the demo merchant paid (anvil account 8). */
  merchant: Address;
  payer: { address: Address; privateKey: Hex };
  payerBalance: string;
}

/** The one block `npm run chain` prints once the chain is ready. */
export function chainReadyMessage(info: ChainReadyInfo): string {
  const origin =
    info.contracts === 'deployed'
      ? `contracts deployed now, test USDC minted`
      : `chain kept from the previous run (at block ${info.blockNumber}); its contracts and balances are as you left them`;
  return [
    `Local chain running: ${origin}.`,
    ``,
    `  RPC URL        ${info.rpcUrl}`,
    `  Chain ID       ${info.chainId}`,
    `  Chains file    ${info.chainsFile}  (the service uses it when CHAINS_FILE is unset)`,
    ``,
    `  Add it to a browser wallet (MetaMask: Networks > Add a network manually):`,
    `    Network name      Local (anvil)`,
    `    RPC URL           ${info.rpcUrl}`,
    `    Chain ID          ${info.chainId}`,
    `    Currency symbol   ETH`,
    ``,
    `  Test USDC          ${info.token}  (${info.tokenDecimals} decimals; import it in the wallet as a token)`,
    `  Fee proxy          ${info.feeProxy}`,
    `  Subscriptions      ${info.subscriptionManager}  (SubscriptionManager: docs/subscriptions.md)`,
    `  Fee address        ${info.feeAddress}  (anvil account 9)`,
    `  Relayer            ${info.relayer.address}  (charges subscriptions; key in ${info.relayer.keyFile}, found by the service)`,
    `  Payer with USDC    ${info.payer.address}  (holds ${info.payerBalance} USDC)`,
    `  Its private key    ${info.payer.privateKey}`,
    `                     anvil's well-known account 0: public knowledge, for this local chain only.`,
    `                     Accounts 1 to 7 of anvil's "test test ... junk" mnemonic hold test USDC too.`,
    `  Demo merchant      ${info.merchant}  (anvil account 8: npm run demo makes it the sandbox settlement address)`,
    ``,
    `  Next, in another terminal:`,
    `    npm start`,
    `    npm run demo`,
    `    npm run pay -- <reference>`,
    ``,
    `  Ctrl-C stops the chain; its state is kept in ${info.stateDir}/ (npm run chain -- --fresh starts over).`,
  ].join('\n');
}
