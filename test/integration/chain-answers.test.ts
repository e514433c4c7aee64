// The ready block says whether each watched chain answers (issue 25): "chains local (31337)" for a
// chain that does not answer was a promise the start could not keep. Against a real anvil, a port
// nobody listens on, and a URL that answers as another chain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeWatchedNow } from '../../src/chain/chain-answers.js';
import { loadConfig } from '../../src/config.js';
import { startAnvil, type AnvilProcess } from '../../src/devchain/anvil.js';
import type { Chain } from '../../src/domain/chains.js';
import { freePort } from '../../src/lib/free-port.js';
import { formatReadyBlock, readyInfo } from '../../src/runtime/ready.js';

let anvil: AnvilProcess;
beforeAll(async () => {
  anvil = await startAnvil({ port: 0 });
}, 60_000);
afterAll(async () => {
  await anvil?.stop();
});

function chain(rpcUrls: string[], chainId = 31337, network = 'local'): Chain {
  return { chainId, network, environment: 'sandbox', rpcUrls, confirmations: 2, feeProxy: null, feeAddress: null, subscriptionManager: null, startBlock: 0, explorerUrl: null, publicRpcUrl: null, tokens: [] };
}

describe('the ready block names each watched chain and whether it answers', () => {
  it('an answering chain as before; a silent one, or one answering as another chain, says it is not answering and where', async () => {
    const deadPort = await freePort();
    const lines = await describeWatchedNow([
      chain([anvil.rpcUrl]),
      chain([`http://127.0.0.1:${deadPort}`], 31337, 'local-down'),
      chain([anvil.rpcUrl], 5, 'goerli'),
      chain([], 84532, 'base-sepolia'),
    ]);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe('local (31337), 2 confirmations');
    expect(lines[1]).toMatch(new RegExp(`^local-down \\(31337\\), 2 confirmations, not answering at http://127\\.0\\.0\\.1:${deadPort} \\(.+; is npm run chain running\\?\\)$`));
    expect(lines[2]).toBe(`goerli (5), 2 confirmations, not answering at ${anvil.rpcUrl.replace(/\/$/, '')} (it answers as chain 31337)`);

    // The block and the JSON line carry it as it is.
    const info = readyInfo({ config: loadConfig({ DATABASE_URL: 'postgres://127.0.0.1/x' }), apiPort: 3000, metricsPort: 9464, workerPort: null, psql: 'psql', watchedChains: lines });
    expect(info.chains).toEqual(lines);
    expect(formatReadyBlock(info)).toContain(`chains        ${lines.join(', ')}`);
  }, 30_000);

  it('a URL that takes longer than the wait is not answering, and the block is not held up past it', async () => {
    const net = await import('node:net');
    // Accepts and never answers: a node that hangs.
    const sockets: import('node:net').Socket[] = [];
    const server = net.createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as import('node:net').AddressInfo).port;
    try {
      const started = Date.now();
      const [line] = await describeWatchedNow([chain([`http://127.0.0.1:${port}`])], 500);
      expect(line).toMatch(/, not answering at http:\/\/127\.0\.0\.1:\d+ \(eth_chainId timed out after 500 ms; is npm run chain running\?\)$/);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
  }, 30_000);
});
