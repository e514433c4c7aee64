// The relayer's keys, one per chain, read once at start: RELAYER_PRIVATE_KEY_<chainId> (the key
// itself, parsed by src/config.ts into a Secret) wins for its chain; else RELAYER_PRIVATE_KEY_FILE
// (a path, for every chain); else, for the local chain (31337) only, `relayer.key` beside
// CHAINS_FILE, which `npm run chain` writes (mode 600) next to var/chain/chains.json. A key file
// its group or others may read is refused, as ssh refuses one. The key never leaves its Secret but
// to make the signing account, and no error or log line carries it.
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Hex } from 'viem';
import type { Config } from '../config.js';
import { LOCAL_CHAIN_ID } from '../domain/chains.js';
import { Secret } from '../lib/secret.js';

/** The file `npm run chain` writes beside its chains file (src/devchain writes it; this reads it). */
export const LOCAL_RELAYER_KEY_FILE = 'relayer.key';

/** A key that cannot be used: the start stops with this one line (it names the variable, never the key). */
export class RelayerKeyError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RelayerKey {
  chainId: number;
  key: Secret<Hex>;
  /** Where it came from, for the start line: the variable's name or the file's path. */
  source: string;
}

/**
 * The key in `file`: 64 hexadecimal characters, `0x` optional, surrounding whitespace ignored.
 * Refused when the file's group or others may read it, or when it holds anything else.
 */
export function readKeyFile(file: string, variable: string): Secret<Hex> {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    throw new RelayerKeyError(variable, `${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if ((mode & 0o077) !== 0) {
    throw new RelayerKeyError(variable, `${file} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`);
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new RelayerKeyError(variable, `${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const hex = /^0x/i.test(text) ? text.slice(2) : text;
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new RelayerKeyError(variable, `${file} must hold one private key: 64 hexadecimal characters, 0x optional`);
  return new Secret<Hex>(`0x${hex.toLowerCase()}`);
}

/** The local chain's key file, when CHAINS_FILE names a file with `relayer.key` beside it. */
function localKeyFile(config: Pick<Config, 'chainsFile'>, cwd: string): string | null {
  if (config.chainsFile === null) return null;
  const file = path.join(path.dirname(path.resolve(cwd, config.chainsFile)), LOCAL_RELAYER_KEY_FILE);
  try {
    statSync(file);
    return file;
  } catch {
    return null;
  }
}

/**
 * One key per chain that has one, in the order of config.chains; every file read once. Throws
 * RelayerKeyError for a file that cannot be used.
 */
export function loadRelayerKeys(config: Pick<Config, 'chains' | 'chainsFile' | 'relayerPrivateKeyFile' | 'relayerPrivateKeys'>, cwd = process.cwd()): RelayerKey[] {
  let shared: Secret<Hex> | null = null;
  if (config.relayerPrivateKeyFile !== null) shared = readKeyFile(path.resolve(cwd, config.relayerPrivateKeyFile), 'RELAYER_PRIVATE_KEY_FILE');
  let local: { key: Secret<Hex>; file: string } | null | undefined;
  const keys: RelayerKey[] = [];
  for (const chain of config.chains) {
    const own = config.relayerPrivateKeys[chain.chainId];
    if (own !== undefined) {
      keys.push({ chainId: chain.chainId, key: own, source: `RELAYER_PRIVATE_KEY_${chain.chainId}` });
    } else if (shared !== null) {
      keys.push({ chainId: chain.chainId, key: shared, source: 'RELAYER_PRIVATE_KEY_FILE' });
    } else if (chain.chainId === LOCAL_CHAIN_ID) {
      if (local === undefined) {
        const file = localKeyFile(config, cwd);
        local = file === null ? null : { key: readKeyFile(file, 'RELAYER_PRIVATE_KEY_FILE'), file };
      }
      if (local !== null) keys.push({ chainId: chain.chainId, key: local.key, source: `${path.relative(cwd, local.file) || local.file} (found: npm run chain)` });
    }
  }
  return keys;
}
