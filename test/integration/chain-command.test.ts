// `npm run chain` as a newcomer runs it: a real npm process on a free CHAIN_PORT with a temporary
// CHAIN_STATE_DIR. It prints its block, the contracts answer, a payer holds USDC; SIGTERM to the
// npm process alone leaves nothing running; a restart keeps addresses, balances and blocks;
// `-- --fresh` starts over.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createPublicClient, createWalletClient, http, type Address } from 'viem';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/lib/free-port.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { WELL_KNOWN_ACCOUNTS, wellKnownAccount } from '../../src/devchain/accounts.js';
import { RELAYER_ACCOUNT_INDEX, RELAYER_FUNDING_WEI } from '../../src/devchain/relayer-key.js';
import { TEST_USDC_ABI } from '../../src/devchain/contracts.js';
import { alive, commandOf, descendants, signal, type Proc } from '../helpers/proc.js';

const root = path.resolve(import.meta.dirname, '../..');
const MERCHANT: Address = '0x2222222222222222222222222222222222222222';
const READY_LINE = 'Ctrl-C stops the chain';

interface RunningChain {
  npm: ChildProcess;
  /** node and anvil, as seen below npm when the chain was ready. */
  below: Proc[];
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function portAcceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('npm run chain', () => {
  let stateDir: string;
  let port: number;
  let rpcUrl: string;
  const started: RunningChain[] = [];

  const startChain = async (args: string[] = []): Promise<RunningChain> => {
    const npm = spawn('npm', ['run', 'chain', ...(args.length > 0 ? ['--', ...args] : [])], {
      cwd: root,
      env: { ...process.env, CHAIN_PORT: String(port), CHAIN_STATE_DIR: stateDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    npm.stderr?.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })));
    const running: RunningChain = { npm, below: [], output: () => out, exited };
    started.push(running);
    let gone = false;
    void exited.then(() => (gone = true));
    await waitFor('the ready block', () => {
      if (gone) throw new Error(`npm run chain exited early:\n${out}`);
      return out.includes(READY_LINE);
    }, 60_000);
    running.below = descendants(npm.pid as number);
    return running;
  };

  /** SIGTERM to the npm process only (not its group), as a process manager or `kill <pid>` does. */
  const stopChain = async (chain: RunningChain) => {
    const below = chain.below;
    expect(below.map(commandOf).some((c) => c.includes('anvil'))).toBe(true);
    chain.npm.kill('SIGTERM');
    expect(await chain.exited).toEqual({ code: 0, signal: null });
    await waitFor('node and anvil to exit', () => below.every((p) => !alive(p)), 15_000);
    expect(await portAcceptsConnections(port)).toBe(false);
  };

  const client = () => createPublicClient({ transport: http(rpcUrl), cacheTime: 0 });
  const chainsFile = async () =>
    JSON.parse(await readFile(path.join(stateDir, 'chains.json'), 'utf8')) as [
      { fee_proxy: Address; subscription_manager: Address | null; tokens: [{ address: Address }]; rpc_urls: string[] },
    ];
  const balanceOf = (token: Address, who: Address) => client().readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'balanceOf', args: [who] });

  beforeAll(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), 'chain-state-'));
    port = await freePort();
    rpcUrl = `http://127.0.0.1:${port}`;
  });
  afterEach(async () => {
    // A failed test must not leave a chain running: npm, then whatever it left behind, get SIGTERM.
    for (const chain of started.splice(0)) {
      if (chain.npm.exitCode === null && chain.npm.signalCode === null) {
        chain.npm.kill('SIGTERM');
        await chain.exited;
      }
      for (const p of chain.below) signal(p, 'SIGTERM');
      await waitFor('leftovers to exit', () => chain.below.every((p) => !alive(p)), 15_000);
    }
  });
  afterAll(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  it('starts, deploys, prints one block; SIGTERM to npm stops everything; a restart keeps the chain; --fresh starts over', async () => {
    // First run: deploys.
    let chain = await startChain();
    expect(chain.output()).toContain('contracts deployed now');
    expect(chain.output()).toContain(`RPC URL        ${rpcUrl}`);
    expect(chain.output()).toContain('Chain ID       31337');
    expect(chain.output()).toContain('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
    expect(chain.output().match(/Local chain running/g)).toHaveLength(1);
    const [entry] = await chainsFile();
    expect(entry.rpc_urls).toEqual([rpcUrl]);
    const token = entry.tokens[0].address;
    expect(chain.output()).toContain(`Test USDC          ${token}`);
    expect(await client().getChainId()).toBe(31337);
    expect(await client().getCode({ address: entry.fee_proxy })).toMatch(/^0x[0-9a-f]{100,}$/);
    // The SubscriptionManager, deployed beside them and named in the chains file and the block.
    const manager = entry.subscription_manager!;
    expect(chain.output()).toContain(`Subscriptions      ${manager}`);
    expect(await client().readContract({ address: manager, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'MAX_FEE_BPS' })).toBe(1000);
    // The relayer's key beside the chains file, for the owner only, its account given gas.
    const relayer = wellKnownAccount(RELAYER_ACCOUNT_INDEX);
    const keyFile = path.join(stateDir, 'relayer.key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFile, 'utf8').trim()).toBe(relayer.privateKey);
    expect(chain.output()).toContain(`Relayer            ${relayer.address}`);
    expect(await client().getBalance({ address: relayer.address })).toBe(RELAYER_FUNDING_WEI);
    expect(await client().readContract({ address: token, abi: TEST_USDC_ABI, functionName: 'decimals' })).toBe(6);
    const payer = WELL_KNOWN_ACCOUNTS[1].address;
    expect(await balanceOf(token, payer)).toBe(1_000_000_000_000n);

    // Something to keep: a transfer, then blocks (one a second).
    const wallet = createWalletClient({ account: payer, transport: http(rpcUrl) });
    const hash = await wallet.writeContract({ address: token, abi: TEST_USDC_ABI, functionName: 'transfer', args: [MERCHANT, 7_000_000n], chain: null });
    const receipt = await client().waitForTransactionReceipt({ hash, pollingInterval: 100 });
    expect(receipt.status).toBe('success');
    await waitFor('two blocks after the transfer', async () => (await client().getBlockNumber()) >= receipt.blockNumber + 2n, 10_000);
    const blockBeforeStop = await client().getBlockNumber();
    await stopChain(chain);

    // Second run: the same chain, and the same manager.
    chain = await startChain();
    expect(chain.output()).toContain('chain kept from the previous run');
    expect(chain.output()).not.toContain('contracts deployed now');
    const [kept] = await chainsFile();
    expect(kept.fee_proxy).toBe(entry.fee_proxy);
    expect(kept.tokens[0].address).toBe(token);
    expect(kept.subscription_manager).toBe(manager);
    await stopChain(chain);

    // A chains file from before the SubscriptionManager existed: the chain is kept and gains one.
    await writeFile(path.join(stateDir, 'chains.json'), JSON.stringify([{ ...kept, subscription_manager: undefined }]));
    chain = await startChain();
    expect(chain.output()).toContain('chain kept from the previous run');
    const [upgraded] = await chainsFile();
    expect(upgraded.fee_proxy).toBe(entry.fee_proxy);
    expect(upgraded.subscription_manager).not.toBe(manager);
    expect(await client().readContract({ address: upgraded.subscription_manager!, abi: SUBSCRIPTION_MANAGER_ABI, functionName: 'subscriptionCount' })).toBe(0n);
    expect(await balanceOf(token, MERCHANT)).toBe(7_000_000n);
    expect(await balanceOf(token, payer)).toBe(1_000_000_000_000n - 7_000_000n);
    expect(await client().getBlockNumber()).toBeGreaterThanOrEqual(blockBeforeStop);
    // The old blocks and their logs are there too (a watcher rescanning from block 0 finds them).
    const keptReceipt = await client().getTransactionReceipt({ hash });
    expect(keptReceipt.blockHash).toBe(receipt.blockHash);
    const transfers = await client().getLogs({ address: token, fromBlock: 0n, toBlock: receipt.blockNumber });
    expect(transfers.map((l) => l.transactionHash)).toContain(hash);
    await stopChain(chain);

    // --fresh: a new chain from block 0 (same addresses: a fresh anvil deploys deterministically).
    chain = await startChain(['--fresh']);
    expect(chain.output()).toContain('contracts deployed now');
    expect(await client().getBlockNumber()).toBeLessThan(blockBeforeStop);
    expect(await balanceOf(token, MERCHANT)).toBe(0n);
    expect((await chainsFile())[0].tokens[0].address).toBe(token);
    expect((await chainsFile())[0].subscription_manager).toBe(manager);
    await stopChain(chain);
  }, 160_000); // four runs of npm run chain, each a process start, a deploy or a state load, and a stop

  it('on a port already in use (a chain already running there) says so and how to go on, exit 1, and leaves that listener alone', async () => {
    const taken = net.createServer((socket) => socket.end());
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    try {
      const npm = spawn('npm', ['run', '--silent', 'chain'], {
        cwd: root,
        env: { ...process.env, CHAIN_PORT: String(takenPort), CHAIN_STATE_DIR: stateDir },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      npm.stderr?.on('data', (c: Buffer) => (err += c.toString()));
      const code = await new Promise<number | null>((resolve) => npm.once('exit', resolve));
      expect(code).toBe(1);
      const first = err.trim().split('\n')[0];
      expect(first).toContain(`port ${takenPort} is already in use, most likely by a chain already running`);
      expect(first).toContain('CHAIN_PORT=');
      expect(err).not.toContain('exited on its own');
      expect(taken.listening).toBe(true);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it('refuses a bad CHAIN_PORT and an unknown argument with one line, exit 1', async () => {
    for (const [env, args, message] of [
      [{ CHAIN_PORT: 'eighty' }, [], 'CHAIN_PORT must be a port number'],
      [{}, ['--frsh'], 'unknown argument "--frsh"'],
    ] as const) {
      const npm = spawn('npm', ['run', '--silent', 'chain', ...(args.length > 0 ? ['--', ...args] : [])], {
        cwd: root,
        env: { ...process.env, CHAIN_PORT: String(port), CHAIN_STATE_DIR: stateDir, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      npm.stderr?.on('data', (c: Buffer) => (err += c.toString()));
      const code = await new Promise<number | null>((resolve) => npm.once('exit', resolve));
      expect(code).toBe(1);
      expect(err.trim().split('\n')[0]).toContain(message);
    }
  });
});
