// EIP-681 payment request URIs: what a wallet opens to pay an ERC-20 invoice. Pure.

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * `ethereum:<token>@<chainId>/transfer?address=<to>&uint256=<atomic>`: an ERC-20 `transfer` of
 * exactly `amountAtomic` (integer string, the token's smallest unit) to `to`, on `chainId`.
 */
export function erc20TransferUri(p: { tokenAddress: string; chainId: number; to: string; amountAtomic: string }): string {
  if (!ADDRESS.test(p.tokenAddress)) throw new RangeError(`not a token address: ${p.tokenAddress}`);
  if (!ADDRESS.test(p.to)) throw new RangeError(`not a recipient address: ${p.to}`);
  if (!Number.isSafeInteger(p.chainId) || p.chainId <= 0) throw new RangeError(`not a chain id: ${p.chainId}`);
  // Integers only: EIP-681's scientific notation ("1.5e6") is legal but wallets read it unevenly.
  if (!/^(0|[1-9]\d*)$/.test(p.amountAtomic)) throw new RangeError(`not an atomic amount: ${p.amountAtomic}`);
  return `ethereum:${p.tokenAddress}@${p.chainId}/transfer?address=${p.to}&uint256=${p.amountAtomic}`;
}
