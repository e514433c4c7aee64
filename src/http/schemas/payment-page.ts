// The JSON of the public payment page: `GET /pay/<reference>/status`, which the page's wallet
// script reads to pay and to follow its payment. The script's own type of it is derived from this
// schema (src/page/wallet/pay.ts), so the two cannot drift apart. Public facts only: nothing here
// names a person or an id of the service.
import { type Static, Type } from 'typebox';
import { INVOICE_STATUSES } from '../../domain/invoice-rules.js';
import { PAYMENT_STATUSES } from '../../domain/payments.js';
import { PaymentInstructionsSchema } from './invoices.js';
import { Address, AtomicAmount, literals, Nullable } from './parts.js';

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

/** `POST /pay/<link id>/subscribe`'s body: the email the receipts go to, as a link checkout's. */
export const SubscriptionCheckoutBody = Type.Object(
  { customer_email: Type.String({ format: 'email', maxLength: 254 }) },
  { additionalProperties: false },
);
export type SubscriptionCheckoutBody = Static<typeof SubscriptionCheckoutBody>;

const Bytes32 = Type.String({ pattern: '^0x[0-9a-f]{64}$' });

/**
 * The SubscriptionManager's `Terms` struct exactly as the wallet must sign it (contracts/
 * SubscriptionManager.sol): the watcher makes a subscription only from a Subscribed event whose
 * terms equal these, so the script passes them through untouched.
 */
export const SubscriptionTermsSchema = Type.Object({
  payee: Address,
  token: Address,
  amount: AtomicAmount,
  period: Type.Integer({ minimum: 1 }),
  fee_bps: Type.Integer({ minimum: 0, maximum: 1000 }),
  fee_address: Address,
  operator: Address,
  /** Unix seconds; 0: no end. */
  ends_at: Type.Integer({ minimum: 0 }),
  checkout_reference: Bytes32,
});

/** What the page's script needs to subscribe: the contract, the terms, the allowance to ask, the chain. */
export const SubscriptionCheckoutAnswer = Type.Object({
  checkout_id: Type.String(),
  status_url: Type.String(),
  /** The first period's invoice page (payable by any wallet payment of its reference too). */
  invoice_page_url: Type.String(),
  chain_id: Type.Integer(),
  network: Type.String(),
  currency: Type.String(),
  token_decimals: Type.Integer(),
  contract_address: Address,
  terms: SubscriptionTermsSchema,
  /** Approved to the contract when the wallet's allowance is below the first period's amount. */
  allowance_atomic: AtomicAmount,
  /** The fee part of each period's amount (atomic), for the page to say. */
  fee_atomic: AtomicAmount,
  chain: Nullable(PageWalletChain),
});
export type SubscriptionCheckoutAnswer = Static<typeof SubscriptionCheckoutAnswer>;

/** `pending` until the watcher made the subscription (`subscribed`); `expired` once the checkout was voided unused. */
export const SUBSCRIPTION_CHECKOUT_STATES = ['pending', 'subscribed', 'expired'] as const;

/** `GET /pay/<link id>/subscribe/<checkout id>/status`: public facts only, as the invoice status. */
export const SubscriptionCheckoutStatus = Type.Object({
  status: literals(SUBSCRIPTION_CHECKOUT_STATES),
  invoice_status: literals(INVOICE_STATUSES),
  required_confirmations: Type.Integer(),
  /** The first invoice's payments: the subscribe call's once the watcher saw it. */
  payments: Type.Array(
    Type.Object({
      tx_hash: Type.String(),
      status: literals(PAYMENT_STATUSES),
      confirmations: Type.Integer(),
    }),
  ),
});
export type SubscriptionCheckoutStatus = Static<typeof SubscriptionCheckoutStatus>;
