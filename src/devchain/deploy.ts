// Deploys a local chain's contracts (the fee proxy, the test USDC, then the SubscriptionManager)
// from anvil's account 0 and mints test USDC to the payers. On a fresh anvil the addresses are
// always the same: they derive from the deployer and its nonces 0, 1 and 2 (CREATE), and nothing
// else is sent first. deploySubscriptionManager also deploys the manager alone, from any key, on
// any chain (`npm run contracts:deploy`).
import {
  createPublicClient,
  createWalletClient,
  getAddress,
  http,
  type Account,
  type Address,
  type Hash,
  type PublicClient,
} from 'viem';
import { SUBSCRIPTION_MANAGER_ABI } from '../chain/subscription-manager-abi.js';
import { DEPLOYER_INDEX, PAYER_INDICES, WELL_KNOWN_ACCOUNTS } from './accounts.js';
import { FEE_PROXY_ABI } from '../chain/abi.js';
import {
  ERC20_FEE_PROXY_BYTECODE,
  SUBSCRIPTION_MANAGER_BYTECODE,
  TEST_USDC_ABI,
  TEST_USDC_BYTECODE,
  TEST_USDC_DECIMALS,
} from './contracts.js';

/** 1,000,000 test USDC (6 decimals) per payer. */
export const DEFAULT_MINT_ATOMIC = 1_000_000n * 10n ** BigInt(TEST_USDC_DECIMALS);

/** Receipts are polled this often: viem's default (4 s over HTTP) would make a deploy last seconds on automine. */
const RECEIPT_POLL_MS = 100;
const RECEIPT_TIMEOUT_MS = 30_000;

export interface DevChainContracts {
  feeProxy: Address;
  token: Address;
  tokenDecimals: number;
  subscriptionManager: Address;
}

export interface DeployOptions {
  /** Who receives test USDC: default the payers (well-known accounts 0 to 7). */
  mintTo?: readonly Address[];
  mintAtomic?: bigint;
}

/** Deploys the fee proxy, the test USDC and the SubscriptionManager, mints, and returns the (EIP-55) addresses. */
export async function deployDevContracts(rpcUrl: string, opts: DeployOptions = {}): Promise<DevChainContracts> {
  const publicClient = createPublicClient({ transport: http(rpcUrl), pollingInterval: RECEIPT_POLL_MS });
  const wallet = createWalletClient({ account: WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX].address, transport: http(rpcUrl) });
  const chain = null;

  // All deployments are sent before any is mined, so on a chain with a block time they share a block.
  const proxyHash = await wallet.deployContract({ abi: FEE_PROXY_ABI, bytecode: ERC20_FEE_PROXY_BYTECODE, chain });
  const tokenHash = await wallet.deployContract({ abi: TEST_USDC_ABI, bytecode: TEST_USDC_BYTECODE, chain });
  const managerHash = await wallet.deployContract({ abi: SUBSCRIPTION_MANAGER_ABI, bytecode: SUBSCRIPTION_MANAGER_BYTECODE, chain });
  const [proxyReceipt, tokenReceipt, managerReceipt] = await Promise.all(
    [proxyHash, tokenHash, managerHash].map((hash) => waitForSuccess(publicClient, hash)),
  );
  if (!proxyReceipt.contractAddress || !tokenReceipt.contractAddress || !managerReceipt.contractAddress) {
    throw new Error('deploy: a receipt has no contract address');
  }
  const contracts: DevChainContracts = {
    feeProxy: getAddress(proxyReceipt.contractAddress),
    token: getAddress(tokenReceipt.contractAddress),
    tokenDecimals: TEST_USDC_DECIMALS,
    subscriptionManager: getAddress(managerReceipt.contractAddress),
  };
  const mintTo = opts.mintTo ?? PAYER_INDICES.map((i) => WELL_KNOWN_ACCOUNTS[i].address);
  await mintTestUsdc(rpcUrl, contracts.token, mintTo, opts.mintAtomic ?? DEFAULT_MINT_ATOMIC);
  return contracts;
}

/** Mints `amountAtomic` test USDC to each address (anyone may mint the test token); waits for the receipts. */
export async function mintTestUsdc(rpcUrl: string, token: Address, to: readonly Address[], amountAtomic: bigint): Promise<void> {
  const publicClient = createPublicClient({ transport: http(rpcUrl), pollingInterval: RECEIPT_POLL_MS });
  const wallet = createWalletClient({ account: WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX].address, transport: http(rpcUrl) });
  const hashes: Hash[] = [];
  for (const address of to) {
    hashes.push(await wallet.writeContract({ address: token, abi: TEST_USDC_ABI, functionName: 'mint', args: [address, amountAtomic], chain: null }));
  }
  await Promise.all(hashes.map((hash) => waitForSuccess(publicClient, hash)));
}

export interface DeployedManager {
  address: Address;
  /** The block of the deployment: nothing of the manager happened before it. */
  blockNumber: bigint;
  transactionHash: Hash;
}

/**
 * Deploys the SubscriptionManager from `account` (a local account with its key, or an address the
 * node unlocks, as anvil's are) on the chain at rpcUrl; waits for the receipt.
 */
export async function deploySubscriptionManager(rpcUrl: string, account: Account | Address, timeoutMs = RECEIPT_TIMEOUT_MS): Promise<DeployedManager> {
  const publicClient = createPublicClient({ transport: http(rpcUrl), pollingInterval: RECEIPT_POLL_MS });
  const wallet = createWalletClient({ account, transport: http(rpcUrl) });
  const hash = await wallet.deployContract({ abi: SUBSCRIPTION_MANAGER_ABI, bytecode: SUBSCRIPTION_MANAGER_BYTECODE, chain: null });
  const receipt = await waitForSuccess(publicClient, hash, timeoutMs);
  if (!receipt.contractAddress) throw new Error(`deploy: transaction ${hash} created no contract`);
  return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber, transactionHash: hash };
}

/** True when every address has code on the chain at rpcUrl (a kept state, not a fresh chain). */
export async function hasCode(rpcUrl: string, addresses: readonly Address[]): Promise<boolean> {
  const publicClient = createPublicClient({ transport: http(rpcUrl) });
  const codes = await Promise.all(addresses.map((address) => publicClient.getCode({ address })));
  return codes.every((code) => code !== undefined && code !== '0x');
}

/** True when the fee proxy and the token have code at these addresses on the chain at rpcUrl. */
export async function hasDevContracts(rpcUrl: string, contracts: Pick<DevChainContracts, 'feeProxy' | 'token'>): Promise<boolean> {
  return hasCode(rpcUrl, [contracts.feeProxy, contracts.token]);
}

async function waitForSuccess(client: PublicClient, hash: Hash, timeoutMs = RECEIPT_TIMEOUT_MS) {
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: RECEIPT_POLL_MS, timeout: timeoutMs });
  if (receipt.status !== 'success') throw new Error(`deploy: transaction ${hash} reverted`);
  return receipt;
}
