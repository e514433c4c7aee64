// The local chain's pieces that need no chain: the committed contract artifact is what the source
// compiles to, the typed ABIs are the artifacts', the well-known accounts are anvil's, and the
// chains file reads back what it wrote.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Abi } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FEE_ACCOUNT_INDEX, MERCHANT_ACCOUNT_INDEX, PAYER_INDICES, WELL_KNOWN_ACCOUNTS } from '../../src/devchain/accounts.js';
import { anvilArgs, anvilBinary } from '../../src/devchain/anvil.js';
import { ChainCommandError, chainCommandOptions } from '../../src/devchain/chain-command.js';
import { localChainsFileEntry, readLocalContracts, writeChainsFile } from '../../src/devchain/chains-file.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { FEE_PROXY_ABI } from '../../src/chain/abi.js';
import { ARTIFACT_ABIS, TEST_USDC_ABI } from '../../src/devchain/contracts.js';

const root = path.resolve(import.meta.dirname, '../..');

/** Each function and event of an ABI as `kind name(type [indexed], ...) -> outputs`, sorted: what decoding depends on. */
function signatures(abi: Abi): string[] {
  return abi
    .flatMap((item) => {
      if (item.type === 'event') return [`event ${item.name}(${item.inputs.map((i) => `${i.type}${i.indexed ? ' indexed' : ''}`).join(',')})`];
      if (item.type === 'function') return [`function ${item.name}(${item.inputs.map((i) => i.type).join(',')}) -> (${item.outputs.map((o) => o.type).join(',')})`];
      return [];
    })
    .sort();
}

interface AbiParam {
  name?: string;
  type: string;
  indexed?: boolean;
  components?: readonly AbiParam[];
}

/** An ABI as comparable data: items sorted, parameters with name, type, indexed and struct fields (no internalType). */
function normalised(abi: Abi): unknown[] {
  const param = (p: AbiParam): unknown => ({ name: p.name ?? '', type: p.type, indexed: p.indexed ?? false, components: (p.components ?? []).map(param) });
  return abi
    .map((item) => {
      const i = item as { type: string; name?: string; inputs?: readonly AbiParam[]; outputs?: readonly AbiParam[]; stateMutability?: string };
      return JSON.stringify({
        type: i.type,
        name: i.name ?? '',
        inputs: (i.inputs ?? []).map(param),
        outputs: (i.outputs ?? []).map((o) => ({ ...(param(o) as object), name: '' })),
        stateMutability: i.stateMutability ?? '',
      });
    })
    .sort();
}

describe('contracts', () => {
  it('contracts/artifacts/ (TestUSDC, SubscriptionManager) are what contracts/*.sol compile to (not stale)', async () => {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [path.join(root, 'scripts/compile-contracts.mjs'), '--check'], { cwd: root }).catch(
      (err: { stdout: string; stderr: string; code: number }) => {
        throw new Error(`compile --check exited ${err.code}: ${err.stderr}`);
      },
    );
    expect(stderr).toBe('');
    expect(stdout).toBe('');
    // solc (WebAssembly) compiling both contracts and OpenZeppelin's SafeERC20: seconds of CPU.
  }, 90_000);

  it('the typed ABIs are the artifacts\' (the proxy entirely; the token for what is called)', () => {
    expect(signatures(FEE_PROXY_ABI)).toEqual(signatures(ARTIFACT_ABIS.feeProxy as Abi));
    const artifact = signatures(ARTIFACT_ABIS.testUsdc as Abi);
    for (const sig of signatures(TEST_USDC_ABI)) expect(artifact).toContain(sig);
    expect(artifact).toContain('function mint(address,uint256) -> ()');
    expect(signatures(FEE_PROXY_ABI)).toContain('event TransferWithReferenceAndFee(address,address,uint256,bytes indexed,uint256,address)');
  });

  it('the service\'s SubscriptionManager ABI is the artifact\'s, whole: every name, type, struct field and indexed flag', () => {
    expect(normalised(SUBSCRIPTION_MANAGER_ABI)).toEqual(normalised(ARTIFACT_ABIS.subscriptionManager as Abi));
    expect(signatures(SUBSCRIPTION_MANAGER_ABI)).toContain('event Charged(uint256 indexed,uint32 indexed,bytes8 indexed)');
  });
});

describe('well-known accounts', () => {
  it('are anvil\'s default accounts; 0 to 7 pay, 8 is the demo merchant, 9 takes the fees', () => {
    expect(WELL_KNOWN_ACCOUNTS).toHaveLength(10);
    expect(WELL_KNOWN_ACCOUNTS[0]).toEqual({
      index: 0,
      address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
      privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
    });
    expect(WELL_KNOWN_ACCOUNTS[9].address).toBe('0xa0Ee7A142d267C1f36714E4a8F75612F20a79720');
    expect(FEE_ACCOUNT_INDEX).toBe(9);
    expect(MERCHANT_ACCOUNT_INDEX).toBe(8);
    expect(PAYER_INDICES).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('anvil', () => {
  it('runs the platform package\'s binary with the given options', () => {
    expect(anvilBinary()).toMatch(/@foundry-rs\/anvil-linux-amd64\/bin\/anvil$/);
    expect(anvilArgs({ port: 8545, blockTime: 1, statePath: 'var/chain/state.json' })).toEqual([
      '--host', '127.0.0.1', '--port', '8545', '--chain-id', '31337', '--block-time', '1', '--state', 'var/chain/state.json',
    ]);
    expect(anvilArgs({ port: 0, chainId: 5 })).toEqual(['--host', '127.0.0.1', '--port', '0', '--chain-id', '5']);
  });
});

describe('chains file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'chains-file-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const contracts = {
    feeProxy: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
    token: '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512',
    tokenDecimals: 6,
    subscriptionManager: '0x9fe46736679d2d9a65f0992f2272de9f3c7fa6e0',
  } as const;

  it('builds the local entry with EIP-55 addresses and account 9 as fee address', () => {
    expect(localChainsFileEntry({ rpcUrl: 'http://127.0.0.1:8545', ...contracts })).toEqual({
      chain_id: 31337,
      network: 'local',
      environment: 'sandbox',
      rpc_urls: ['http://127.0.0.1:8545'],
      confirmations: 2,
      fee_proxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      fee_address: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
      subscription_manager: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0',
      start_block: 0,
      explorer_url: null,
      tokens: [{ currency: 'USDC', address: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512', decimals: 6 }],
    });
  });

  it('reads back the contracts it wrote; null for a missing, broken or foreign file', async () => {
    const file = path.join(dir, 'nested', 'chains.json');
    expect(readLocalContracts(file)).toBeNull();
    writeChainsFile(file, [localChainsFileEntry({ rpcUrl: 'http://127.0.0.1:8545', ...contracts })]);
    expect(readLocalContracts(file)).toEqual({
      feeProxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      token: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
      tokenDecimals: 6,
      subscriptionManager: '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0',
    });
    // A file written before the SubscriptionManager existed: the rest is kept, the manager is null.
    writeChainsFile(file, [{ ...localChainsFileEntry({ rpcUrl: 'http://127.0.0.1:8545', ...contracts }), subscription_manager: null }]);
    expect(readLocalContracts(file)).toMatchObject({ feeProxy: '0x5FbDB2315678afecb367f032d93F642f64180aa3', subscriptionManager: null });
    expect(readLocalContracts(file, 1)).toBeNull();
    await writeFile(file, '[{"chain_id": 31337, "fee_proxy": "0x12"');
    expect(readLocalContracts(file)).toBeNull();
    await writeFile(file, '[{"chain_id": 31337, "fee_proxy": "not an address", "tokens": []}]');
    expect(readLocalContracts(file)).toBeNull();
  });
});

describe('npm run chain options', () => {
  it('defaults to port 8545 and var/chain', () => {
    expect(chainCommandOptions({}, [])).toEqual({
      port: 8545,
      stateDir: 'var/chain',
      statePath: path.join('var/chain', 'state.json'),
      chainsFile: path.join('var/chain', 'chains.json'),
      fresh: false,
    });
  });

  it('reads CHAIN_PORT, CHAIN_STATE_DIR and --fresh', () => {
    expect(chainCommandOptions({ CHAIN_PORT: '9545', CHAIN_STATE_DIR: '/tmp/x' }, ['--fresh'])).toMatchObject({
      port: 9545,
      statePath: '/tmp/x/state.json',
      chainsFile: '/tmp/x/chains.json',
      fresh: true,
    });
    expect(chainCommandOptions({ CHAIN_PORT: '', CHAIN_STATE_DIR: ' ' }, []).port).toBe(8545);
  });

  it('refuses a bad port or an unknown argument, naming it', () => {
    for (const port of ['0', '65536', '85.45', 'x', '-1']) {
      expect(() => chainCommandOptions({ CHAIN_PORT: port }, [])).toThrow(new ChainCommandError(`CHAIN_PORT must be a port number (1 to 65535), got "${port}"`));
    }
    expect(() => chainCommandOptions({}, ['--fres'])).toThrow(/unknown argument "--fres"/);
  });
});
