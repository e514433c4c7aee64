// Deploys a local chain's contracts (the fee proxy, then the test USDC) from anvil's account 0
// and mints test USDC to the payers. On a fresh anvil the addresses are always the same: they
// derive from the deployer and its nonces 0 and 1 (CREATE), and nothing else is sent first.
import {
  createPublicClient,
  createWalletClient,
  getAddress,
  http,
  type Address,
  type Hash,
  type PublicClient,
} from 'viem';
import { DEPLOYER_INDEX, PAYER_INDICES, WELL_KNOWN_ACCOUNTS } from './accounts.js';
import { ERC20_FEE_PROXY_ABI, ERC20_FEE_PROXY_BYTECODE, TEST_USDC_ABI, TEST_USDC_BYTECODE, TEST_USDC_DECIMALS } from './contracts.js';

/** 1,000,000 test USDC (6 decimals) per payer. */
export const DEFAULT_MINT_ATOMIC = 1_000_000n * 10n ** BigInt(TEST_USDC_DECIMALS);

/** Receipts are polled this often: viem's default (4 s over HTTP) would make a deploy last seconds on automine. */
const RECEIPT_POLL_MS = 100;
const RECEIPT_TIMEOUT_MS = 30_000;

export interface DevChainContracts {
  feeProxy: Address;
  token: Address;
  tokenDecimals: number;
}

export interface DeployOptions {
  /** Who receives test USDC: default the payers (well-known accounts 0 to 7). */
  mintTo?: readonly Address[];
  mintAtomic?: bigint;
}

/** Deploys the fee proxy and the test USDC, mints, and returns the (EIP-55) addresses. */
export async function deployDevContracts(rpcUrl: string, opts: DeployOptions = {}): Promise<DevChainContracts> {
  const publicClient = createPublicClient({ transport: http(rpcUrl), pollingInterval: RECEIPT_POLL_MS });
  const wallet = createWalletClient({ account: WELL_KNOWN_ACCOUNTS[DEPLOYER_INDEX].address, transport: http(rpcUrl) });
  const chain = null;

  // Both deployments are sent before either is mined, so on a chain with a block time they share a block.
  const proxyHash = await wallet.deployContract({ abi: ERC20_FEE_PROXY_ABI, bytecode: ERC20_FEE_PROXY_BYTECODE, chain });
  const tokenHash = await wallet.deployContract({ abi: TEST_USDC_ABI, bytecode: TEST_USDC_BYTECODE, chain });
  const [proxyReceipt, tokenReceipt] = await Promise.all([proxyHash, tokenHash].map((hash) => waitForSuccess(publicClient, hash)));
  if (!proxyReceipt.contractAddress || !tokenReceipt.contractAddress) throw new Error('deploy: a receipt has no contract address');
  const contracts: DevChainContracts = {
    feeProxy: getAddress(proxyReceipt.contractAddress),
    token: getAddress(tokenReceipt.contractAddress),
    tokenDecimals: TEST_USDC_DECIMALS,
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

/** True when both contracts have code at these addresses on the chain at rpcUrl (a kept state, not a fresh chain). */
export async function hasDevContracts(rpcUrl: string, contracts: Pick<DevChainContracts, 'feeProxy' | 'token'>): Promise<boolean> {
  const publicClient = createPublicClient({ transport: http(rpcUrl) });
  const codes = await Promise.all([contracts.feeProxy, contracts.token].map((address) => publicClient.getCode({ address })));
  return codes.every((code) => code !== undefined && code !== '0x');
}

async function waitForSuccess(client: PublicClient, hash: Hash) {
  const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: RECEIPT_POLL_MS, timeout: RECEIPT_TIMEOUT_MS });
  if (receipt.status !== 'success') throw new Error(`deploy: transaction ${hash} reverted`);
  return receipt;
}
