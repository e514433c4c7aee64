// What the ready block says of each watched chain: its name, id and confirmations, and whether it
// answers right now. A chain named but not answering (anvil not started, a node down, a URL that
// answers another chain) is said so at start, not discovered later in a warning line.
import { describeWatched, isWatched, LOCAL_CHAIN_ID, type Chain } from '../domain/chains.js';
import { firstLine } from '../lib/first-line.js';
import { withTimeout } from '../lib/with-timeout.js';
import { chainIdAt, redactRpcUrl } from './rpc.js';

/** How long the ready block waits for a chain to answer: a start line, not a health check. */
export const CHAIN_ANSWER_TIMEOUT_MS = 3_000;

/**
 * One readable line per watched chain, as `describeWatched`, each followed by ", not answering
 * at <url> (<why>)" when none of its RPC URLs answers its chain id within `timeoutMs`.
 */
export async function describeWatchedNow(chains: readonly Chain[], timeoutMs = CHAIN_ANSWER_TIMEOUT_MS): Promise<string[]> {
  const watched = chains.filter(isWatched);
  const lines = describeWatched(watched);
  return Promise.all(watched.map(async (chain, i) => `${lines[i]}${await notAnswering(chain, timeoutMs)}`));
}

/** "" when one of the chain's URLs answers its chain id; else what the first one said. */
async function notAnswering(chain: Chain, timeoutMs: number): Promise<string> {
  const answers = await Promise.allSettled(chain.rpcUrls.map((url) => withTimeout(chainIdAt(url, () => {}), timeoutMs, 'eth_chainId')));
  if (answers.some((a) => a.status === 'fulfilled' && a.value === chain.chainId)) return '';
  const first = answers[0];
  const why = first.status === 'fulfilled' ? `it answers as chain ${first.value}` : firstLine(first.reason);
  const hint = chain.chainId === LOCAL_CHAIN_ID ? '; is npm run chain running?' : '';
  return `, not answering at ${redactRpcUrl(chain.rpcUrls[0])} (${why}${hint})`;
}
