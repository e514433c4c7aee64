// `npm run contracts:deploy` against a real node (anvil, here with Base Sepolia's chain id): the
// SubscriptionManager is deployed from the key file's account, answers, and the printed line names
// it; a key file others may read is refused before anything is sent.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createPublicClient, http, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { WELL_KNOWN_ACCOUNTS } from '../../src/devchain/accounts.js';
import { startAnvil, type AnvilProcess } from '../../src/devchain/anvil.js';

const root = path.resolve(import.meta.dirname, '../..');
const OPERATOR = WELL_KNOWN_ACCOUNTS[3];

async function deploy(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)('npm', ['run', '--silent', 'contracts:deploy', '--', ...args], { cwd: root });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('npm run contracts:deploy', () => {
  let anvil: AnvilProcess;
  const dir = mkdtempSync(path.join(tmpdir(), 'contracts-deploy-'));
  const keyFile = path.join(dir, 'operator.key');

  beforeAll(async () => {
    anvil = await startAnvil({ port: 0, chainId: 84532 });
    writeFileSync(keyFile, `${OPERATOR.privateKey}\n`);
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  it('refuses a key file others may read, in one line, sending nothing', async () => {
    chmodSync(keyFile, 0o644);
    const r = await deploy(['--rpc', anvil.rpcUrl, '--key-file', keyFile]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([`npm run contracts:deploy: --key-file ${keyFile} is readable by others (mode 644): chmod 600 it first`]);
    expect(`${r.stdout}${r.stderr}`).not.toContain(OPERATOR.privateKey.slice(2));
    const client = createPublicClient({ transport: http(anvil.rpcUrl) });
    expect(await client.getTransactionCount({ address: OPERATOR.address })).toBe(0);
  });

  it('deploys the SubscriptionManager from the key\'s account and prints the CHAINS_FILE line', async () => {
    chmodSync(keyFile, 0o600);
    const r = await deploy(['--rpc', anvil.rpcUrl, '--key-file', keyFile]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(`${r.stdout}`).not.toContain(OPERATOR.privateKey.slice(2));
    const lines = r.stdout.trim().split('\n');
    const entry = JSON.parse(lines.at(-1)!) as { chain_id: number; subscription_manager: Address };
    expect(entry.chain_id).toBe(84532);
    expect(lines[0]).toBe(`SubscriptionManager deployed on chain 84532 at ${entry.subscription_manager}`);
    expect(lines[1]).toContain(`from ${OPERATOR.address}`);

    const client = createPublicClient({ transport: http(anvil.rpcUrl) });
    const read = (functionName: 'MAX_FEE_BPS' | 'subscriptionCount') => client.readContract({ address: entry.subscription_manager, abi: SUBSCRIPTION_MANAGER_ABI, functionName });
    expect(await read('MAX_FEE_BPS')).toBe(1000);
    expect(await read('subscriptionCount')).toBe(0n);
    expect(await client.getTransactionCount({ address: OPERATOR.address })).toBe(1);
  }, 60_000);
});
