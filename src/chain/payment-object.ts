// A payment row as the API shows it (GET /v1/payments/{id}, its events): the fields, plus
// what the merchant needs to act on it (outcome, the fee the rule expected, where to see it).
import { explorerTxUrl, type ChainRegistry } from '../domain/chains.js';
import { confirmationsAt, type PaymentOutcome, type PaymentStatus } from '../domain/payments.js';
import type { PaymentKind } from './kinds/index.js';
import type { PaymentRow } from '../db/payments.js';

export interface PaymentObject {
  id: string;
  object: 'payment';
  invoice_id: string | null;
  chain_id: number;
  network: string;
  tx_hash: string;
  log_index: number;
  block_number: number;
  block_hash: string;
  token_address: string;
  from: string | null;
  to: string;
  /** proxy: the call's amount as its event states it; transfer: the value. */
  amount_atomic: string;
  /** proxy: the call's feeAmount as its event states it (whether it moved or not); transfer: 0. */
  fee_atomic: string;
  /** amount_atomic + fee_atomic: what the payer's call stated, not what counts (counted_atomic). */
  total_atomic: string;
  fee_address: string | null;
  /** The fee the account's rate asks of a proxy payment of this size; null for a transfer. */
  fee_expected_atomic: string | null;
  /** True when the fee's Transfer reached the chain's fee address; false for a transfer, a fee sent elsewhere or not moved. */
  fee_collected: boolean;
  /** What the transaction's Transfer logs show reached the settlement address for this payment. */
  received_atomic: string;
  /** What it added to its invoice's amount_paid_atomic: received_atomic plus the collected fee up to the invoice's own fee; null when it counts toward nothing. */
  counted_atomic: string | null;
  /** True once a reorg deeper than the confirmations took its block off the chain (status removed, counted no more). */
  reorged_out: boolean;
  payment_reference: string | null;
  kind: PaymentKind;
  status: PaymentStatus;
  outcome: PaymentOutcome | null;
  confirmations: number;
  explorer_url: string | null;
  created_at: string;
  confirmed_at: string | null;
}

/** `chains`: the deployment's (the explorer link); `head`: the chain's head as last seen (confirmations are counted from it). */
export function presentPayment(p: PaymentRow, chains: ChainRegistry, head: bigint | null = p.head_block === null ? null : BigInt(p.head_block)): PaymentObject {
  return {
    id: p.id,
    object: 'payment',
    invoice_id: p.invoice_id,
    chain_id: p.chain_id,
    network: p.network,
    tx_hash: p.tx_hash,
    log_index: p.log_index,
    block_number: Number(p.block_number),
    block_hash: p.block_hash,
    token_address: p.token_address,
    from: p.from_address,
    to: p.to_address,
    amount_atomic: p.amount_atomic,
    fee_atomic: p.fee_atomic,
    total_atomic: (BigInt(p.amount_atomic) + BigInt(p.fee_atomic)).toString(),
    fee_address: p.fee_address,
    fee_expected_atomic: p.fee_expected_atomic,
    // Only a kind that takes a fee leg (the proxy) records a fee received.
    fee_collected: BigInt(p.fee_received_atomic) > 0n,
    received_atomic: p.received_atomic,
    // A reorged-out row keeps what it had counted (to count it again should it come back): it counts nothing now.
    counted_atomic: p.status === 'confirmed' ? p.counted_atomic : null,
    reorged_out: p.status === 'removed' && p.reorged_out_at !== null,
    payment_reference: p.payment_reference,
    // Only the kinds write rows (the detector), each with its own name.
    kind: p.kind as PaymentKind,
    status: p.status,
    outcome: p.outcome,
    confirmations: p.status === 'removed' || head === null ? 0 : confirmationsAt(head, BigInt(p.block_number)),
    explorer_url: explorerTxUrl(chains, p.chain_id, p.tx_hash),
    created_at: p.created_at.toISOString(),
    confirmed_at: p.confirmed_at ? p.confirmed_at.toISOString() : null,
  };
}
