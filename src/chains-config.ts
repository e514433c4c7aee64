// The deployment's chains: CHAINS_FILE (a JSON array of chains, joining or overriding the built-in
// ones of src/domain/chains.ts) and RPC_URL_<chainId> (comma-separated URLs, so RPC secrets stay
// in the environment). Read once at start by src/config.ts; a bad file or value is a ConfigError
// naming the variable and what is wrong.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BUILT_IN_CHAINS, mergeChains, type Chain, type ChainOverride, type ChainToken } from './domain/chains.js';
import { parseAddress } from './domain/payments.js';

export class ChainsConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

/** Where `npm run chain` writes its CHAINS_FILE (issue: found without configuration). */
export const LOCAL_CHAINS_FILE = 'var/chain/chains.json';

/**
 * CHAINS_FILE unset and `npm run chain` has written its file: that file, for the entrypoints
 * (which say so in their start line). Tests and explicit configurations never get here.
 */
export function discoverLocalChainsFile(env: Record<string, string | undefined>, cwd = process.cwd()): string | null {
  if (env.CHAINS_FILE) return null;
  const file = path.join(env.CHAIN_STATE_DIR || path.dirname(LOCAL_CHAINS_FILE), path.basename(LOCAL_CHAINS_FILE));
  return existsSync(path.resolve(cwd, file)) ? file : null;
}

export interface LocalChainsChoice<E> {
  /** The environment to load the configuration from: CHAINS_FILE set when the local file was found. */
  env: E & { CHAINS_FILE?: string };
  /** What the start line says (`chains_file`), or null when nothing was found. */
  found: string | null;
}

/** discoverLocalChainsFile applied to an environment, for the entrypoints (one call each). */
export function useLocalChainsFile<E extends Record<string, string | undefined>>(env: E, cwd = process.cwd()): LocalChainsChoice<E> {
  const file = discoverLocalChainsFile(env, cwd);
  if (file === null) return { env, found: null };
  return { env: { ...env, CHAINS_FILE: file }, found: `${file} (found: npm run chain)` };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const URL_PROTOCOLS = ['http:', 'https:', 'ws:', 'wss:'];

function rpcUrl(raw: unknown, where: string): string {
  if (typeof raw !== 'string') throw new Error(`${where} must be a URL string`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error(`${where} must be a URL, got "${raw.slice(0, 80)}"`);
  }
  if (!URL_PROTOCOLS.includes(u.protocol) || u.hostname === '') throw new Error(`${where} must be an absolute http(s) or ws(s) URL`);
  return raw;
}

function address(raw: unknown, where: string): string {
  if (typeof raw !== 'string') throw new Error(`${where} must be an address string`);
  const a = parseAddress(raw, where);
  if (!a.ok) throw new Error(a.message);
  return a.address;
}

function integer(raw: unknown, where: string, min: number, max: number): number {
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < min || raw > max) throw new Error(`${where} must be an integer between ${min} and ${max}`);
  return raw;
}

const CHAIN_KEYS = new Set([
  'chain_id', 'network', 'environment', 'rpc_urls', 'confirmations', 'fee_proxy', 'fee_address', 'start_block', 'explorer_url', 'public_rpc_url', 'tokens',
  'subscription_manager',
]);

function parseChain(raw: Json, i: number): ChainOverride {
  const at = `[${i}]`;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${at} must be an object`);
  const unknown = Object.keys(raw).filter((k) => !CHAIN_KEYS.has(k));
  if (unknown.length > 0) throw new Error(`${at} has an unknown field "${unknown[0]}"`);
  // chain_id columns are Postgres integers.
  const o: ChainOverride = { chainId: integer(raw.chain_id, `${at}.chain_id`, 1, 2_147_483_647) };
  if (raw.network !== undefined) {
    if (typeof raw.network !== 'string' || !/^[a-z0-9][a-z0-9-]{0,39}$/.test(raw.network)) throw new Error(`${at}.network must be lower-case letters, digits and dashes`);
    o.network = raw.network;
  }
  if (raw.environment !== undefined) {
    if (raw.environment !== 'sandbox' && raw.environment !== 'live') throw new Error(`${at}.environment must be "sandbox" or "live"`);
    o.environment = raw.environment;
  }
  if (raw.rpc_urls !== undefined) {
    if (!Array.isArray(raw.rpc_urls)) throw new Error(`${at}.rpc_urls must be an array of URLs`);
    o.rpcUrls = raw.rpc_urls.map((u, j) => rpcUrl(u, `${at}.rpc_urls[${j}]`));
  }
  if (raw.confirmations !== undefined) o.confirmations = integer(raw.confirmations, `${at}.confirmations`, 0, 10_000);
  if (raw.fee_proxy !== undefined) o.feeProxy = raw.fee_proxy === null ? null : address(raw.fee_proxy, `${at}.fee_proxy`);
  if (raw.fee_address !== undefined) o.feeAddress = raw.fee_address === null ? null : address(raw.fee_address, `${at}.fee_address`);
  if (raw.subscription_manager !== undefined) {
    o.subscriptionManager = raw.subscription_manager === null ? null : address(raw.subscription_manager, `${at}.subscription_manager`);
  }
  if (raw.start_block !== undefined) o.startBlock = integer(raw.start_block, `${at}.start_block`, 0, Number.MAX_SAFE_INTEGER);
  if (raw.explorer_url !== undefined) o.explorerUrl = raw.explorer_url === null ? null : rpcUrl(raw.explorer_url, `${at}.explorer_url`);
  // Shown to payers (a wallet adds the chain with it): the file says it is public, so it is.
  if (raw.public_rpc_url !== undefined) o.publicRpcUrl = raw.public_rpc_url === null ? null : rpcUrl(raw.public_rpc_url, `${at}.public_rpc_url`);
  if (raw.tokens !== undefined) {
    if (!Array.isArray(raw.tokens)) throw new Error(`${at}.tokens must be an array`);
    o.tokens = raw.tokens.map((t, j): ChainToken => {
      const tt = `${at}.tokens[${j}]`;
      if (t === null || typeof t !== 'object' || Array.isArray(t)) throw new Error(`${tt} must be an object`);
      if (typeof t.currency !== 'string' || !/^[A-Z0-9]{2,12}$/.test(t.currency)) throw new Error(`${tt}.currency must be 2-12 upper-case letters or digits`);
      return { currency: t.currency, address: address(t.address, `${tt}.address`), decimals: integer(t.decimals, `${tt}.decimals`, 0, 36) };
    });
  }
  return o;
}

function readChainsFile(file: string): ChainOverride[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let json: Json;
  try {
    json = JSON.parse(text) as Json;
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${file} is not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(json)) throw new ChainsConfigError('CHAINS_FILE', `${file} must hold a JSON array of chains`);
  try {
    const chains = json.map(parseChain);
    const seen = new Set<number>();
    for (const c of chains) {
      if (seen.has(c.chainId)) throw new Error(`lists chain ${c.chainId} twice`);
      seen.add(c.chainId);
    }
    return chains;
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${file}${(err as Error).message.startsWith('[') ? '' : ' '}${(err as Error).message}`);
  }
}

/** The chains in use: built in, joined by CHAINS_FILE, with RPC_URL_<chainId> over both. */
export function loadChains(chainsFile: string | null, rpcUrls: Record<number, string[]>): Chain[] {
  const fromFile = chainsFile === null ? [] : readChainsFile(chainsFile);
  let chains: Chain[];
  try {
    chains = mergeChains(BUILT_IN_CHAINS, fromFile);
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${chainsFile}: ${(err as Error).message}`);
  }
  for (const [id, urls] of Object.entries(rpcUrls)) {
    const chain = chains.find((c) => c.chainId === Number(id));
    if (!chain) throw new ChainsConfigError(`RPC_URL_${id}`, `names chain ${id}, which is neither built in nor in CHAINS_FILE`);
    chain.rpcUrls = urls;
  }
  return chains;
}
