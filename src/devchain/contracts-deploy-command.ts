// `npm run contracts:deploy -- --rpc <url> --key-file <path>` (main/contracts-deploy.ts): deploys
// the SubscriptionManager on a chain for an operator and prints the line to add to CHAINS_FILE.
// What it reads (the arguments, the key file) and what it prints are plain functions here, called
// by the unit tests; the entrypoint does the chain I/O (deploySubscriptionManager in deploy.ts).
import { statSync, readFileSync } from 'node:fs';
import type { Address, Hash, Hex } from 'viem';

export const CONTRACTS_DEPLOY_USAGE = 'npm run contracts:deploy -- --rpc <url> --key-file <path>';

/** Refused before anything is sent: the entrypoint prints the message as one line and exits 1. */
export class ContractsDeployError extends Error {}

export interface ContractsDeployOptions {
  rpcUrl: string;
  keyFile: string;
}

/** Reads the arguments after `npm run contracts:deploy --` (`--name value` or `--name=value`). */
export function contractsDeployOptions(args: readonly string[]): ContractsDeployOptions {
  const values: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (name !== '--rpc' && name !== '--key-file') throw new ContractsDeployError(`unknown argument "${arg.slice(0, 40)}" (usage: ${CONTRACTS_DEPLOY_USAGE})`);
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else value = args[++i];
    if (value === undefined || value === '') throw new ContractsDeployError(`${name} needs a value (usage: ${CONTRACTS_DEPLOY_USAGE})`);
    values[name] = value;
  }
  const rpcUrl = values['--rpc'];
  const keyFile = values['--key-file'];
  if (rpcUrl === undefined) throw new ContractsDeployError(`--rpc is required (usage: ${CONTRACTS_DEPLOY_USAGE})`);
  if (keyFile === undefined) throw new ContractsDeployError(`--key-file is required (usage: ${CONTRACTS_DEPLOY_USAGE})`);
  let url: URL;
  try {
    url = new URL(rpcUrl);
  } catch {
    throw new ContractsDeployError(`--rpc must be an http(s) URL, got "${rpcUrl.slice(0, 80)}"`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw new ContractsDeployError(`--rpc must be an http(s) URL, got "${rpcUrl.slice(0, 80)}"`);
  }
  return { rpcUrl, keyFile };
}

/**
 * The deployer's private key from its file: 64 hexadecimal characters, with or without 0x, and
 * surrounding whitespace. A file that its group or others may read is refused (the key would not
 * be the operator's alone). The key itself never appears in an error.
 */
export function readDeployKey(file: string): Hex {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    throw new ContractsDeployError(`--key-file ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if ((mode & 0o077) !== 0) {
    throw new ContractsDeployError(`--key-file ${file} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it first`);
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ContractsDeployError(`--key-file ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const hex = text.startsWith('0x') || text.startsWith('0X') ? text.slice(2) : text;
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new ContractsDeployError(`--key-file ${file} must hold one private key: 64 hexadecimal characters, 0x optional`);
  return `0x${hex.toLowerCase()}`;
}

export interface Deployed {
  chainId: number;
  address: Address;
  blockNumber: bigint;
  transactionHash: Hash;
  deployer: Address;
}

/** The chain's entry fields for CHAINS_FILE: joined to a built-in chain by chain_id, or added to a chain of the file. */
export function chainsFileLine(d: Pick<Deployed, 'chainId' | 'address'>): string {
  return JSON.stringify({ chain_id: d.chainId, subscription_manager: d.address });
}

/** What the command prints once the deployment is mined; the last line is the CHAINS_FILE entry. */
export function deployedMessage(d: Deployed): string[] {
  return [
    `SubscriptionManager deployed on chain ${d.chainId} at ${d.address}`,
    `  block ${d.blockNumber}, transaction ${d.transactionHash}, from ${d.deployer}`,
    `Add subscription_manager to that chain's entry in CHAINS_FILE (a new entry for a built-in chain, or the field in its existing one):`,
    chainsFileLine(d),
  ];
}
