// The SubscriptionManager contract (contracts/SubscriptionManager.sol, docs/subscriptions.md): its
// whole ABI, typed, for the service (subscribe from the checkout page, charge and cancel from the
// relayer, the Subscribed / Charged / Canceled logs for the watcher). The artifact
// (contracts/artifacts/SubscriptionManager.json) holds the same ABI and the bytecode;
// test/unit/devchain.test.ts checks they are equal.
import { parseAbi } from 'viem';

export const SUBSCRIPTION_MANAGER_ABI = parseAbi([
  'struct Terms { address payee; address token; uint96 amount; uint32 period; uint16 feeBps; address feeAddress; address operator; uint40 endsAt; bytes32 checkoutReference; }',
  'struct Subscription { address subscriber; uint32 lastChargedPeriod; bool canceled; uint40 startedAt; uint16 feeBps; address payee; uint96 amount; address token; uint32 period; uint40 endsAt; address feeAddress; address operator; }',
  'function subscribe(Terms terms) returns (uint256 id)',
  'function charge(uint256 id, uint32 periodIndex, bytes8 paymentReference)',
  'function cancel(uint256 id)',
  'function getSubscription(uint256 id) view returns (Subscription)',
  'function periodStart(uint256 id, uint32 periodIndex) view returns (uint256)',
  'function feeOf(uint256 amount, uint16 feeBps) pure returns (uint256)',
  'function subscriptionCount() view returns (uint256)',
  'function MAX_FEE_BPS() view returns (uint16)',
  'event Subscribed(uint256 indexed id, address indexed subscriber, bytes32 indexed checkoutReference, address payee, address token, uint256 amount, uint32 period, uint16 feeBps, address feeAddress, address operator, uint40 startedAt, uint40 endsAt)',
  'event Charged(uint256 indexed id, uint32 indexed periodIndex, bytes8 indexed paymentReference)',
  'event Canceled(uint256 indexed id, address indexed by)',
  'error InvalidTerms(string field)',
  'error UnknownSubscription(uint256 id)',
  'error NotOperator(uint256 id, address caller)',
  'error NotAllowedToCancel(uint256 id, address caller)',
  'error SubscriptionCanceled(uint256 id)',
  'error SubscriptionEnded(uint256 id, uint40 endsAt)',
  'error PeriodNotBegun(uint256 id, uint32 periodIndex, uint256 beginsAt)',
  'error PeriodAlreadyCharged(uint256 id, uint32 periodIndex, uint32 lastCharged)',
  'error SafeERC20FailedOperation(address token)',
]);
