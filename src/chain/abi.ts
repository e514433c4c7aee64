// The one home of what the service, the payment page's wallet script and the local chain know of
// Request Network's ERC20FeeProxy (contracts/artifacts/ERC20FeeProxy.json holds its whole ABI and
// bytecode; test/unit/devchain.test.ts checks this against it): the payer's call and the event the
// detector reads; and the ERC-20 `Transfer` event (every other ERC-20 item is viem's `erc20Abi`).
// Written out rather than parseAbi'd: the wallet script is bundled for browsers, and viem's
// human-readable ABI parser would add its weight to the bundle.

/** The proxy's event: one per payment through it, its reference indexed (what the detector filters on). */
export const TRANSFER_WITH_REFERENCE_AND_FEE = {
  type: 'event',
  name: 'TransferWithReferenceAndFee',
  inputs: [
    { name: 'tokenAddress', type: 'address', indexed: false },
    { name: 'to', type: 'address', indexed: false },
    { name: 'amount', type: 'uint256', indexed: false },
    { name: 'paymentReference', type: 'bytes', indexed: true },
    { name: 'feeAmount', type: 'uint256', indexed: false },
    { name: 'feeAddress', type: 'address', indexed: false },
  ],
} as const;

/** What a payer calls: moves `_amount` to `_to` and `_feeAmount` to `_feeAddress` (after an approve of both). */
const TRANSFER_FROM_WITH_REFERENCE_AND_FEE = {
  type: 'function',
  name: 'transferFromWithReferenceAndFee',
  stateMutability: 'nonpayable',
  inputs: [
    { name: '_tokenAddress', type: 'address' },
    { name: '_to', type: 'address' },
    { name: '_amount', type: 'uint256' },
    { name: '_paymentReference', type: 'bytes' },
    { name: '_feeAmount', type: 'uint256' },
    { name: '_feeAddress', type: 'address' },
  ],
  outputs: [],
} as const;

/** ERC20FeeProxy: the call and the event, typed for viem (writeContract, parseEventLogs, deployContract). */
export const FEE_PROXY_ABI = [TRANSFER_FROM_WITH_REFERENCE_AND_FEE, TRANSFER_WITH_REFERENCE_AND_FEE] as const;

/** The ERC-20 `Transfer` event (as in viem's `erc20Abi`), for the settlement addresses' plain transfers. */
export const ERC20_TRANSFER = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { name: 'from', type: 'address', indexed: true },
    { name: 'to', type: 'address', indexed: true },
    { name: 'value', type: 'uint256', indexed: false },
  ],
} as const;
