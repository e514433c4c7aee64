// The deployment's chains: CHAINS_FILE (a JSON array of chains, joining or overriding the built-in
// ones of src/domain/chains.ts) and RPC_URL_<chainId> (comma-separated URLs, so RPC secrets stay
// in the environment). Read once at start by src/config.ts; a bad file or value is a ConfigError
// naming the variable and what is wrong.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BUILT_IN_CHAINS, mergeChains, type Chain, type ChainOverride, type ChainToken } from './domain/chains.js';
import { parseAddress } from './domain/payments.js';
import { firstLine } from './lib/first-line.js';
import { Type, type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';

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

/** The protocols a chain's RPC endpoint may use. */
const RPC_URL_PROTOCOLS = ['http:', 'https:', 'ws:', 'wss:'];

/**
 * The one check of a chain's URL (an RPC URL of CHAINS_FILE or RPC_URL_<chainId>, an explorer):
 * null when it is an absolute http(s) or ws(s) URL with a host, else what is wrong, to follow
 * the field's name.
 */
export function chainUrlProblem(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return `must be a URL, got "${raw.slice(0, 80)}"`;
  }
  return RPC_URL_PROTOCOLS.includes(u.protocol) && u.hostname !== '' ? null : 'must be an absolute http(s) or ws(s) URL';
}

// The CHAINS_FILE format, once: the writer's type (src/devchain/chains-file.ts), the reader's
// validation and its one-line errors (`must`: what the field must be, said after its place) all
// come from this schema. What JSON Schema cannot say (an EIP-55 checksum, a URL's parts) is
// checked after it, by the same functions as elsewhere.
const addressField = (must = 'be an address string') => Type.String({ must });
const nullableAddress = () => Type.Union([Type.Null(), Type.String()], { must: 'be an address string or null' });
const urlField = () => Type.String({ must: 'be a URL string' });

export const ChainsFileToken = Type.Object(
  {
    currency: Type.String({ pattern: '^[A-Z0-9]{2,12}$', must: 'be 2-12 upper-case letters or digits' }),
    address: addressField(),
    decimals: Type.Integer({ minimum: 0, maximum: 36, must: 'be an integer between 0 and 36' }),
  },
  { additionalProperties: false, must: 'be an object with currency, address and decimals' },
);

/** One chain of a CHAINS_FILE (snake_case: the file's format): a whole new chain, or fields of a built-in one. */
export const ChainsFileChain = Type.Object(
  {
    // chain_id columns are Postgres integers.
    chain_id: Type.Integer({ minimum: 1, maximum: 2_147_483_647, must: 'be an integer between 1 and 2147483647' }),
    network: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,39}$', must: 'be lower-case letters, digits and dashes' })),
    environment: Type.Optional(Type.Union([Type.Literal('sandbox'), Type.Literal('live')], { must: 'be "sandbox" or "live"' })),
    rpc_urls: Type.Optional(Type.Array(urlField(), { must: 'be an array of URLs' })),
    confirmations: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, must: 'be an integer between 0 and 10000' })),
    fee_proxy: Type.Optional(nullableAddress()),
    fee_address: Type.Optional(nullableAddress()),
    /** The SubscriptionManager (contracts/SubscriptionManager.sol); null: no subscriptions on this chain. */
    subscription_manager: Type.Optional(nullableAddress()),
    start_block: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, must: `be an integer between 0 and ${Number.MAX_SAFE_INTEGER}` })),
    explorer_url: Type.Optional(Type.Union([Type.Null(), Type.String()], { must: 'be a URL string or null' })),
    /** Shown to payers (a wallet adds the chain with it): the file says it is public, so it is. */
    public_rpc_url: Type.Optional(Type.Union([Type.Null(), Type.String()], { must: 'be a URL string or null' })),
    tokens: Type.Optional(Type.Array(ChainsFileToken, { must: 'be an array' })),
  },
  { additionalProperties: false, must: 'be an object' },
);
export type ChainsFileChain = Static<typeof ChainsFileChain>;

/** A CHAINS_FILE: a JSON array of chains. */
export const ChainsFile = Type.Array(ChainsFileChain, { must: 'hold a JSON array of chains' });

/** `[0].tokens[1].address` for the instance path `/0/tokens/1/address`. */
function placeOf(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg}`))
    .join('');
}

/** The `must` of the deepest schema on the path that has one. */
function mustAt(schema: TSchema, instancePath: string): string {
  let at: TSchema | undefined = schema;
  let must = 'be valid';
  for (const seg of ['', ...instancePath.split('/').slice(1)]) {
    if (at === undefined) break;
    if (seg !== '') {
      const s = at as { items?: TSchema; properties?: Record<string, TSchema> };
      at = /^\d+$/.test(seg) && s.items ? s.items : s.properties?.[seg];
    }
    const m = (at as { must?: unknown } | undefined)?.must;
    if (typeof m === 'string') must = m;
  }
  return must;
}

/** The first thing wrong with a CHAINS_FILE's JSON, in one line (`[0].fee_proxy must be an address string`), or null. */
export function chainsFileProblem(json: unknown): string | null {
  const errors = Value.Errors(ChainsFile, json);
  if (errors.length === 0) return null;
  const unknown = errors.find((e) => e.keyword === 'additionalProperties');
  if (unknown) {
    const names = (unknown.params as { additionalProperties?: string[] }).additionalProperties ?? [];
    return `${placeOf(unknown.instancePath)} has an unknown field "${names[0]}"`;
  }
  // The deepest place first: "[0].tokens[0].decimals must ..." rather than "[0] must be an object".
  const first = [...errors].sort((a, b) => b.instancePath.split('/').length - a.instancePath.split('/').length)[0];
  const place = placeOf(first.instancePath);
  return `${place}${place ? ' ' : ''}must ${mustAt(ChainsFile, first.instancePath)}`;
}

function address(raw: string, where: string): string {
  const a = parseAddress(raw, where);
  if (!a.ok) throw new Error(a.message);
  return a.address;
}

function url(raw: string, where: string): string {
  const problem = chainUrlProblem(raw);
  if (problem !== null) throw new Error(`${where} ${problem}`);
  return raw;
}

/** A checked entry as the domain's override: addresses checksummed, URLs checked. */
function toOverride(c: ChainsFileChain, i: number): ChainOverride {
  const at = `[${i}]`;
  const nullable = <T>(v: string | null | undefined, f: (s: string) => T): T | null | undefined => (v === undefined ? undefined : v === null ? null : f(v));
  return {
    chainId: c.chain_id,
    network: c.network,
    environment: c.environment,
    rpcUrls: c.rpc_urls?.map((u, j) => url(u, `${at}.rpc_urls[${j}]`)),
    confirmations: c.confirmations,
    feeProxy: nullable(c.fee_proxy, (a) => address(a, `${at}.fee_proxy`)),
    feeAddress: nullable(c.fee_address, (a) => address(a, `${at}.fee_address`)),
    subscriptionManager: nullable(c.subscription_manager, (a) => address(a, `${at}.subscription_manager`)),
    startBlock: c.start_block,
    explorerUrl: nullable(c.explorer_url, (u) => url(u, `${at}.explorer_url`)),
    publicRpcUrl: nullable(c.public_rpc_url, (u) => url(u, `${at}.public_rpc_url`)),
    tokens: c.tokens?.map((t, j): ChainToken => ({ currency: t.currency, address: address(t.address, `${at}.tokens[${j}].address`), decimals: t.decimals })),
  };
}

function readChainsFile(file: string): ChainOverride[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ChainsConfigError('CHAINS_FILE', `${file} is not JSON: ${firstLine(err)}`);
  }
  const problem = chainsFileProblem(json);
  if (problem !== null) throw new ChainsConfigError('CHAINS_FILE', `${file}${problem.startsWith('[') ? '' : ' '}${problem}`);
  try {
    const chains = (json as ChainsFileChain[]).map(toOverride);
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
