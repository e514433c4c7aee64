// A chain that exists only in the test: the detector is driven with observations the test builds
// (recordRange, rewindCursor), never over RPC. The chains file names a local chain, with the
// addresses those observations use, whose RPC URL nobody answers.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadChains } from '../../src/chains-config.js';
import type { Chain } from '../../src/domain/chains.js';
import { localChainsFileEntry, writeChainsFile } from '../../src/devchain/chains-file.js';
import { startApiFixture, type ApiFixture } from './context.js';

export const SIMULATED_CHAIN = {
  chainId: 31337,
  token: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
  proxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  feeAddress: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
  payer: '0x1000000000000000000000000000000000000001',
} as const;

/** The API fixture over the simulated chain (6-decimal token), and that chain as the service loads it. */
export async function startSimulatedChainFixture(name: string): Promise<{ fx: ApiFixture; chain: Chain }> {
  const file = path.join(mkdtempSync(path.join(tmpdir(), `${name}-`)), 'chains.json');
  const c = SIMULATED_CHAIN;
  writeChainsFile(file, [
    localChainsFileEntry({ rpcUrl: 'http://127.0.0.1:9', chainId: c.chainId, feeProxy: c.proxy, token: c.token, tokenDecimals: 6, feeAddress: c.feeAddress, subscriptionManager: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0' }),
  ]);
  const fx = await startApiFixture({ CHAINS_FILE: file });
  return { fx, chain: loadChains(file, {}).find((x) => x.chainId === c.chainId)! };
}
