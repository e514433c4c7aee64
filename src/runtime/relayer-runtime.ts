// The relayer in a process (src/chain/relayer.ts): its keys read at start (a refusal is one line,
// exit 1), and the worker's upkeep: on a timer, every chain's in-flight transactions are settled,
// broadcast again or replaced when stuck, and the relayer's balance is read (metric, warning when
// low). Several workers may run it at once: each chain's pass holds that chain's sequence lock.
import { privateKeyToAccount } from 'viem/accounts';
import type { Relayer } from '../chain/relayer.js';
import { loadRelayerKeys, RelayerKeyError, type RelayerKey } from '../chain/relayer-keys.js';
import type { Config } from '../config.js';
import { chainById } from '../domain/chains.js';
import type { OperatorAddressOf } from '../invoicing/subscription-checkout.js';
import type { Logger } from '../log.js';
import { StartupError } from './startup-error.js';

/**
 * The relayer's keys (loadRelayerKeys), read once; a key file others may read becomes a
 * StartupError naming RELAYER_PRIVATE_KEY_FILE. Call it before opening anything, so a refused
 * start leaves nothing to close. Any process that needs the operator's address (the API, for a
 * subscription checkout) reads them so and hands them to createRelayer.
 */
export function readRelayerKeys(config: Config): RelayerKey[] {
  try {
    return loadRelayerKeys(config);
  } catch (err) {
    if (err instanceof RelayerKeyError) throw new StartupError(err.variable, err.message);
    throw err;
  }
}

/**
 * The operator new subscriptions name on each chain, for the API's subscription checkouts: the
 * relayer's address where it has a key and the chain an RPC URL (where the worker's relayer can
 * send charges, createRelayer's rule), null elsewhere.
 */
export function operatorAddressOf(config: Pick<Config, 'chains'>, keys: readonly RelayerKey[]): OperatorAddressOf {
  const operators = new Map<number, string>();
  for (const k of keys) {
    if ((chainById(config.chains, k.chainId)?.rpcUrls.length ?? 0) === 0) continue;
    operators.set(k.chainId, privateKeyToAccount(k.key.reveal()).address);
  }
  return (chainId) => operators.get(chainId) ?? null;
}

export interface RelayerUpkeep {
  /** Stops the timer and waits for a pass in progress. */
  stop(): Promise<void>;
}

export function startRelayerUpkeep(relayer: Relayer, intervalMs: number, log: Logger): RelayerUpkeep {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const tick = () => {
    running = relayer
      .upkeep()
      .catch((err: unknown) => log.error({ err }, 'relayer upkeep failed'))
      .finally(() => {
        running = null;
        if (!stopped) timer = setTimeout(tick, intervalMs);
      });
  };
  // First pass at once: a worker restarted after a crash broadcasts what it left recorded.
  tick();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
