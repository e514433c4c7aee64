// The JSON of the public payment page: `GET /pay/<reference>/status`, which the page's wallet
// script reads to pay and to follow its payment. The script's own type of it is derived from this
// schema (src/page/wallet/pay.ts), so the two cannot drift apart. Public facts only: nothing here
// names a person or an id of the service.
import { type Static, Type } from 'typebox';
import { INVOICE_STATUSES } from '../../domain/invoice-rules.js';
import { PAYMENT_STATUSES } from '../../domain/payments.js';
import { PaymentInstructionsSchema } from './invoices.js';
import { AtomicAmount, literals, Nullable } from './parts.js';

/** What a browser wallet needs to switch to, or add, the invoice's chain (domain/chains.ts walletChain). */
export const PageWalletChain = Type.Object({
  chain_id: Type.Integer(),
  name: Type.String(),
  rpc_url: Nullable(Type.String({ description: 'only an RPC URL the configuration marks public' })),
  explorer_url: Nullable(Type.String()),
  native_symbol: Type.String(),
});

export const PaymentPageStatus = Type.Object({
  status: literals(INVOICE_STATUSES),
  currency: Type.String(),
  amount_atomic: AtomicAmount,
  amount_paid_atomic: AtomicAmount,
  amount_remaining_atomic: AtomicAmount,
  required_confirmations: Type.Integer({ minimum: 0, description: "The chain's confirmations: blocks built on top of a payment's block before it counts" }),
  payments: Type.Array(
    Type.Object({
      tx_hash: Type.String(),
      status: literals(PAYMENT_STATUSES),
      confirmations: Type.Integer({ minimum: 0, description: "Blocks built on top of the payment's block, from the chain head the service last saw: it is confirmed once they reach its chain's confirmations" }),
      explorer_url: Nullable(Type.String()),
    }),
  ),
  instructions: Nullable(PaymentInstructionsSchema),
  /** Null when the invoice's chain is not configured in this deployment. */
  chain: Nullable(PageWalletChain),
});
export type PaymentPageStatus = Static<typeof PaymentPageStatus>;
