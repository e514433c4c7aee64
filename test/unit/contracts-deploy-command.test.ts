// `npm run contracts:deploy`'s rules without a chain: its arguments, the key file (mode, format,
// never echoed) and the CHAINS_FILE line it prints (which the CHAINS_FILE loader accepts).
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChains } from '../../src/chains-config.js';
import {
  ContractsDeployError,
  chainsFileLine,
  contractsDeployOptions,
  deployedMessage,
  readDeployKey,
} from '../../src/devchain/contracts-deploy-command.js';

const KEY = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a';
const dir = mkdtempSync(path.join(tmpdir(), 'deploy-key-'));
function keyFile(name: string, text: string, mode: number): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  chmodSync(file, mode);
  return file;
}

describe('npm run contracts:deploy arguments', () => {
  it('reads --rpc and --key-file, as two words or with =', () => {
    expect(contractsDeployOptions(['--rpc', 'https://node.example/v1/abc', '--key-file', 'k'])).toEqual({ rpcUrl: 'https://node.example/v1/abc', keyFile: 'k' });
    expect(contractsDeployOptions(['--key-file=k', '--rpc=http://127.0.0.1:8545'])).toEqual({ rpcUrl: 'http://127.0.0.1:8545', keyFile: 'k' });
  });

  it.each([
    [[], /--rpc is required/],
    [['--rpc', 'http://127.0.0.1:8545'], /--key-file is required/],
    [['--rpc'], /--rpc needs a value/],
    [['--rpc', 'ftp://x', '--key-file', 'k'], /--rpc must be an http\(s\) URL, got "ftp:\/\/x"/],
    [['--rpc', 'not a url', '--key-file', 'k'], /--rpc must be an http\(s\) URL/],
    [['--key', '0xabc'], /unknown argument "--key"/],
  ])('refuses %j with one line naming what is wrong', (args, message) => {
    expect(() => contractsDeployOptions(args)).toThrow(ContractsDeployError);
    expect(() => contractsDeployOptions(args)).toThrow(message);
  });
});

describe('the key file', () => {
  it('holds one private key, 0x optional, whitespace around it ignored', () => {
    expect(readDeployKey(keyFile('a', `${KEY}\n`, 0o600))).toBe(KEY);
    expect(readDeployKey(keyFile('b', `  ${KEY.slice(2).toUpperCase()}  `, 0o400))).toBe(KEY);
  });

  it('is refused when its group or others may read it, or it holds no key; the key never appears in the message', () => {
    for (const mode of [0o644, 0o640, 0o604, 0o660]) {
      const file = keyFile(`m${mode.toString(8)}`, KEY, mode);
      expect(() => readDeployKey(file)).toThrow(`--key-file ${file} is readable by others (mode ${mode.toString(8)}): chmod 600 it first`);
    }
    const short = keyFile('short', KEY.slice(0, 40), 0o600);
    expect(() => readDeployKey(short)).toThrow(/must hold one private key/);
    try {
      readDeployKey(short);
    } catch (err) {
      expect((err as Error).message).not.toContain(KEY.slice(2, 40));
    }
    expect(() => readDeployKey(path.join(dir, 'missing'))).toThrow(/cannot be read \(ENOENT\)/);
  });
});

describe('what it prints', () => {
  const deployed = {
    chainId: 84532,
    address: '0x663F3ad617193148711d28f5334eE4Ed07016602',
    blockNumber: 7n,
    transactionHash: '0xadc44f9c56d8585861b6bd0ac64e838fdbd91abcef3c758817a373a3db057dd6',
    deployer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
  } as const;

  it('ends with the CHAINS_FILE entry, which the loader accepts and joins to the built-in chain', () => {
    const lines = deployedMessage(deployed);
    expect(lines[0]).toBe('SubscriptionManager deployed on chain 84532 at 0x663F3ad617193148711d28f5334eE4Ed07016602');
    expect(lines.at(-1)).toBe(chainsFileLine(deployed));
    expect(JSON.parse(lines.at(-1)!)).toEqual({ chain_id: 84532, subscription_manager: '0x663F3ad617193148711d28f5334eE4Ed07016602' });
    const file = path.join(dir, 'chains.json');
    writeFileSync(file, `[${lines.at(-1)}]`);
    const chain = loadChains(file, {}).find((c) => c.chainId === 84532);
    expect(chain).toMatchObject({ network: 'base-sepolia', subscriptionManager: '0x663F3ad617193148711d28f5334eE4Ed07016602' });
  });
});
