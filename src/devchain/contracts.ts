// The contracts of a local chain: Request Network's ERC20FeeProxy (ABI and creation bytecode
// copied from @requestnetwork/smart-contracts 0.48.0), the test USDC and the SubscriptionManager
// compiled from contracts/ (`npm run contracts:compile`; the manager's typed ABI is the service's,
// src/chain/subscription-manager-abi.ts, the fee proxy's src/chain/abi.ts). The test USDC's ABI is
// typed here with parseAbi so viem checks every call; test/unit/devchain.test.ts checks the typed
// ABIs equal the artifacts'.
import { erc20Abi, parseAbi, type Hex } from 'viem';
import feeProxyArtifact from '../../contracts/artifacts/ERC20FeeProxy.json' with { type: 'json' };
import subscriptionManagerArtifact from '../../contracts/artifacts/SubscriptionManager.json' with { type: 'json' };
import testUsdcArtifact from '../../contracts/artifacts/TestUSDC.json' with { type: 'json' };

export const TEST_USDC_ABI = [...erc20Abi, ...parseAbi(['function mint(address to, uint256 amount)'])] as const;

export const ERC20_FEE_PROXY_BYTECODE = feeProxyArtifact.bytecode as Hex;
export const TEST_USDC_BYTECODE = testUsdcArtifact.bytecode as Hex;
export const SUBSCRIPTION_MANAGER_BYTECODE = subscriptionManagerArtifact.bytecode as Hex;

/** The artifacts' own ABIs (JSON), for the test that compares them with the typed ones. */
export const ARTIFACT_ABIS = {
  feeProxy: feeProxyArtifact.abi,
  testUsdc: testUsdcArtifact.abi,
  subscriptionManager: subscriptionManagerArtifact.abi,
} as const;

export const TEST_USDC_DECIMALS = 6;
export const TEST_USDC_SYMBOL = 'USDC';
