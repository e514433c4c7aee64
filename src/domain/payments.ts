// On-chain payment rules: the payment reference (derived as Request Network does), what an
// invoice's payer is asked to pay, how a payment counts toward an invoice and what it does to it,
// and which invoice a plain transfer pays. Amounts are atomic integers (bigint), never floats.
import { randomBytes } from 'node:crypto';
import { getAddress, isAddress, keccak256, stringToHex } from 'viem';
import { chainById, type ChainRegistry } from './chains.js';
import type { InvoiceStatus } from './invoice-rules.js';
import { feeAtomic } from './money.js';

export const PAYMENT_STATUSES = ['pending', 'confirmed', 'removed'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];
/**
 * What a confirmed payment did: `applied` to its invoice's amounts (and status), recorded against
 * an invoice that was already `paid` or `void` (nothing changes, the merchant refunds off-system),
 * or `unmatched` (no invoice: the merchant may apply it). Null while pending or removed.
 */
export const PAYMENT_OUTCOMES = ['applied', 'invoice_already_paid', 'invoice_void', 'unmatched'] as const;
export type PaymentOutcome = (typeof PAYMENT_OUTCOMES)[number];

/** 8 random bytes as 16 lower-case hex characters, kept on the invoice. */
export function newReferenceSalt(): string {
  return randomBytes(8).toString('hex');
}

/**
 * Request Network's payment reference: last8Bytes(keccak256(lowercase(requestId + salt +
 * address))), here with the invoice id as the request id. `0x` + 16 lower-case hex.
 */
export function derivePaymentReference(invoiceId: string, salt: string, settlementAddress: string): string {
  const hash = keccak256(stringToHex(`${invoiceId}${salt}${settlementAddress}`.toLowerCase()));
  return `0x${hash.slice(-16)}`;
}

/** The indexed topic of TransferWithReferenceAndFee: keccak256 of the reference's bytes. */
export function referenceTopic(reference: string): string {
  return keccak256(reference as `0x${string}`);
}

export type AddressCheck = { ok: true; address: string } | { ok: false; message: string };

/** An EVM address as EIP-55 (checksummed) or all lower case; returned checksummed. */
export function parseAddress(raw: string, field: string): AddressCheck {
  if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) return { ok: false, message: `${field} must be an address: 0x and 40 hexadecimal characters.` };
  if (/^0x0{40}$/.test(raw)) return { ok: false, message: `${field} must not be the zero address: nothing sent there can be spent.` };
  if (raw !== raw.toLowerCase() && !isAddress(raw, { strict: true })) {
    return { ok: false, message: `${field} has mixed case that is not a valid EIP-55 checksum; give it checksummed or all in lower case.` };
  }
  return { ok: true, address: getAddress(raw) };
}

export function sameAddress(a: string | null, b: string | null): boolean {
  return a !== null && b !== null && a.toLowerCase() === b.toLowerCase();
}

export interface InvoiceBalance {
  status: InvoiceStatus;
  /** The invoice's total, atomic. */
  amountAtomic: bigint;
  /** What applied payments have added up to. */
  paidAtomic: bigint;
}

/** What remains to pay: never below zero (an over-payment leaves nothing to pay). */
export function remainingAtomic(b: Pick<InvoiceBalance, 'amountAtomic' | 'paidAtomic'>): bigint {
  return b.paidAtomic >= b.amountAtomic ? 0n : b.amountAtomic - b.paidAtomic;
}

/** The two amounts of a proxy call for `totalAtomic`: the platform's fee (the rule, half up) and the merchant's share. */
export function splitFee(totalAtomic: bigint, feeBps: number): { amountAtomic: bigint; feeAtomic: bigint } {
  const fee = BigInt(feeAtomic(totalAtomic.toString(), feeBps));
  return { amountAtomic: totalAtomic - fee, feeAtomic: fee };
}

/**
 * No token's supply comes near this: an amount above it is a crafted log (a `feeAmount` of
 * 2^256 - 2), clamped before any arithmetic so no total grows to 78 digits.
 */
export const MAX_COUNTABLE_ATOMIC = 10n ** 36n;

/** An on-chain amount made safe to add: never below 0, never above MAX_COUNTABLE_ATOMIC. */
export function boundedAtomic(v: bigint): bigint {
  return v < 0n ? 0n : v > MAX_COUNTABLE_ATOMIC ? MAX_COUNTABLE_ATOMIC : v;
}

/**
 * The dust floor of a token: 0.01 of a unit (10,000 atomic units of a 6-decimal USDC). A payment
 * below it that no invoice claims is not recorded (no row, no event): anyone can send dust to a
 * settlement address, as many times as they like.
 */
export function dustFloorAtomic(decimals: number): bigint {
  return decimals >= 2 ? 10n ** BigInt(decimals - 2) : 1n;
}

/** What a payment moved, as its Transfer logs show (observe.ts), not as its proxy event claims. */
export interface PaymentReceipt {
  /** What reached the merchant's settlement address. */
  receivedAtomic: bigint;
  /** What reached the chain's configured fee address as the payment's fee. */
  feeReceivedAtomic: bigint;
}

/** The invoice's own fee not counted yet: what a fee that reached the fee address may still add. */
export function feeRoomAtomic(invoiceFeeAtomic: bigint, feeCountedAtomic: bigint): bigint {
  return invoiceFeeAtomic > feeCountedAtomic ? invoiceFeeAtomic - feeCountedAtomic : 0n;
}

/**
 * What a payment counts toward an invoice: what reached its merchant, plus the fee that reached
 * the platform's fee address up to `feeRoom` (the invoice's own fee not counted yet). A fee sent
 * anywhere else (the zero address, the payer, even the merchant) counts nothing, and the fees
 * counted never exceed the invoice's fee: so the invoice's total is reached only once its merchant
 * has received at least `amount - fee`, its part.
 */
export function countedAtomic(p: PaymentReceipt, feeRoom: bigint): { countedAtomic: bigint; feeCountedAtomic: bigint } {
  const fee = boundedAtomic(p.feeReceivedAtomic);
  const feeCounted = fee < feeRoom ? fee : boundedAtomic(feeRoom);
  return { countedAtomic: boundedAtomic(p.receivedAtomic) + feeCounted, feeCountedAtomic: feeCounted };
}

export type Application =
  | { outcome: 'applied'; paidAtomic: bigint; status: InvoiceStatus; fullyPaid: boolean }
  | { outcome: 'invoice_already_paid' | 'invoice_void' };

/**
 * A confirmed payment against an invoice. Open or overdue: the payments add up; paid in full (or
 * more: the excess stays visible in paidAtomic) turns it paid, less keeps its status. Paid or
 * void: recorded against it, nothing changes. A draft has no reference and no address to be paid.
 */
export function applyPayment(inv: InvoiceBalance, counted: bigint): Application {
  if (inv.status === 'void') return { outcome: 'invoice_void' };
  if (inv.status === 'paid' || inv.status === 'draft') return { outcome: 'invoice_already_paid' };
  const paidAtomic = inv.paidAtomic + counted;
  const fullyPaid = paidAtomic >= inv.amountAtomic;
  return { outcome: 'applied', paidAtomic, status: fullyPaid ? 'paid' : inv.status, fullyPaid };
}

/** An invoice's balance with its fee: what applying a payment reads and changes. */
export interface InvoiceLedger extends InvoiceBalance {
  /** The invoice's own fee (of its whole amount). */
  feeAtomic: bigint;
  /** What of it applied payments counted so far. */
  feeCountedAtomic: bigint;
}

export type PaymentApplication =
  | {
      outcome: 'applied';
      /** What the payment adds to the invoice's paid amount (the payment row's counted_atomic). */
      countedAtomic: bigint;
      ledger: InvoiceLedger;
      fullyPaid: boolean;
      /** When it turned the invoice paid: the time of the payment's block. */
      paidAt: Date | null;
      /** It leaves the invoice open having counted more than dust: invoice.partially_paid. */
      announcesPartial: boolean;
    }
  | { outcome: 'invoice_already_paid' | 'invoice_void' };

/**
 * The one rule for applying a confirmed payment to an invoice, whoever applies it (the detector,
 * a merchant's POST /v1/payments/{id}/apply, the sandbox's simulated payment): what it counts
 * (countedAtomic, the fee up to what of the invoice's fee is not counted yet), what that does to
 * the invoice (applyPayment), when it was paid (its block's time), and whether the partial payment
 * is announced (not dust, which anyone can repeat for the gas alone). `restored`: a payment that
 * had counted toward this invoice, reorged out and back: it counts again, even toward the invoice
 * it had paid (which stayed paid). The invoice's paid amount is written from `ledger` only.
 */
export function applyPaymentTo(
  ledger: InvoiceLedger,
  receipt: PaymentReceipt,
  opts: { blockTime: Date; dustFloorAtomic: bigint; restored?: boolean },
): PaymentApplication {
  const c = countedAtomic(receipt, feeRoomAtomic(ledger.feeAtomic, ledger.feeCountedAtomic));
  const application: Application =
    opts.restored && ledger.status === 'paid'
      ? { outcome: 'applied', paidAtomic: ledger.paidAtomic + c.countedAtomic, status: 'paid', fullyPaid: false }
      : applyPayment(ledger, c.countedAtomic);
  if (application.outcome !== 'applied') return application;
  return {
    outcome: 'applied',
    countedAtomic: c.countedAtomic,
    ledger: { ...ledger, paidAtomic: application.paidAtomic, status: application.status, feeCountedAtomic: ledger.feeCountedAtomic + c.feeCountedAtomic },
    fullyPaid: application.fullyPaid,
    paidAt: application.fullyPaid ? opts.blockTime : null,
    announcesPartial: !application.fullyPaid && application.status !== 'paid' && c.countedAtomic >= opts.dustFloorAtomic,
  };
}

/**
 * A plain transfer carries no reference: it pays the one open or overdue invoice sent to that
 * address in that token whose remaining amount is exactly its value. None or several: unmatched.
 * `candidates`: the invoices of that address and token (or any superset: the rule filters).
 */
export function matchTransfer<T extends { balance: InvoiceBalance }>(candidates: readonly T[], value: bigint): T | null {
  const exact = candidates.filter((c) => (c.balance.status === 'open' || c.balance.status === 'overdue') && remainingAtomic(c.balance) === value);
  return exact.length === 1 ? exact[0] : null;
}

/**
 * Confirmations of a log in `block` when the chain's head is `head`: the blocks built on top of
 * its block, the one meaning the word has here (a chain's `confirmations` is how many of them make
 * a payment count), so a payment is confirmed exactly when this reaches its chain's confirmations.
 */
export function confirmationsAt(head: bigint, block: bigint): number {
  return head < block ? 0 : Number(head - block);
}

/** The newest block whose payments count: `confirmations` blocks are built on top of it. */
export function safeHead(head: bigint, confirmations: number): bigint {
  return head - BigInt(confirmations);
}

/** What an invoice is fixed with at send when its account has a settlement address. */
export function newPaymentTarget(invoiceId: string, settlementAddress: string): { settlementAddress: string; salt: string; reference: string; referenceTopic: string } {
  const salt = newReferenceSalt();
  const reference = derivePaymentReference(invoiceId, salt, settlementAddress);
  return { settlementAddress, salt, reference, referenceTopic: referenceTopic(reference) };
}

export interface PaymentInstructions {
  chain_id: number;
  network: string;
  token_address: string;
  token_decimals: number;
  /** The merchant's settlement address (the proxy call's `to`). */
  to: string;
  /** The merchant's share: the proxy call's `amount`. */
  amount_atomic: string;
  /** The platform's share: the proxy call's `feeAmount`. */
  fee_atomic: string;
  /** What remains to pay: amount_atomic + fee_atomic. */
  total_atomic: string;
  fee_address: string;
  proxy_address: string;
  payment_reference: string;
}

export interface PayableInvoice {
  status: InvoiceStatus;
  chainId: number;
  network: string;
  tokenAddress: string;
  tokenDecimals: number;
  settlementAddress: string | null;
  paymentReference: string | null;
  amountAtomic: bigint;
  paidAtomic: bigint;
  /** The fee of the whole amount, as stored at creation. */
  feeAtomic: bigint;
  /** What of it the applied payments counted so far; null when not known (an old event's snapshot). */
  feeCountedAtomic: bigint | null;
  feeBps: number | null;
}

/**
 * What the payer is asked to pay through the chain's fee proxy: what remains, split into the
 * merchant's share and the platform's fee. Null when nothing can be paid that way: a draft, a
 * paid or void invoice, no settlement address or reference, a chain without a proxy or fee address.
 */
export function paymentInstructions(inv: PayableInvoice, chain: { feeProxy: string | null; feeAddress: string | null } | undefined): PaymentInstructions | null {
  if (inv.status !== 'open' && inv.status !== 'overdue') return null;
  if (!inv.settlementAddress || !inv.paymentReference || !chain?.feeProxy || !chain.feeAddress) return null;
  const total = remainingAtomic({ amountAtomic: inv.amountAtomic, paidAtomic: inv.paidAtomic });
  if (total === 0n) return null;
  // Nothing paid yet: the fee stored with the invoice (the same rule, computed when it was made).
  // After a partial payment: the rule's fee of what remains, but never more of the invoice's fee
  // than is left to count (feeRoomAtomic). The partial's own fee may have been rounded up, and a
  // fee past the room counts nothing: paying exactly the instructions left the invoice owing 1.
  const byRule = splitFee(total, inv.feeBps ?? 0).feeAtomic;
  const room = inv.feeCountedAtomic === null ? byRule : feeRoomAtomic(inv.feeAtomic, inv.feeCountedAtomic);
  const fee = inv.paidAtomic === 0n ? inv.feeAtomic : byRule < room ? byRule : room;
  return {
    chain_id: inv.chainId,
    network: inv.network,
    token_address: inv.tokenAddress,
    token_decimals: inv.tokenDecimals,
    to: inv.settlementAddress,
    amount_atomic: (total - fee).toString(),
    fee_atomic: fee.toString(),
    total_atomic: total.toString(),
    fee_address: chain.feeAddress,
    proxy_address: chain.feeProxy,
    payment_reference: inv.paymentReference,
  };
}

/** The invoice columns the instructions read, named as in the invoices table (API rows, page rows, event snapshots). */
export interface PayableColumns {
  status: InvoiceStatus;
  chain_id: number;
  network: string;
  token_address: string;
  token_decimals: number;
  settlement_address: string | null;
  payment_reference: string | null;
  amount_atomic: string | null;
  /** Absent from event snapshots written before payments existed: nothing paid. */
  amount_paid_atomic: string | null;
  fee_atomic: string | null;
  /** Absent from event snapshots written before it was stored: not known. */
  fee_counted_atomic?: string | null;
  fee_bps: number | null;
}

/** paymentInstructions() of an invoice row, on its chain as `chains` (the deployment's) configure it now. */
export function instructionsOfRow(r: PayableColumns, chains: ChainRegistry): PaymentInstructions | null {
  if (r.amount_atomic === null) return null;
  return paymentInstructions(
    {
      status: r.status,
      chainId: r.chain_id,
      network: r.network,
      tokenAddress: r.token_address,
      tokenDecimals: r.token_decimals,
      settlementAddress: r.settlement_address ?? null,
      paymentReference: r.payment_reference ?? null,
      amountAtomic: BigInt(r.amount_atomic),
      paidAtomic: BigInt(r.amount_paid_atomic ?? '0'),
      feeAtomic: BigInt(r.fee_atomic ?? '0'),
      feeCountedAtomic: r.fee_counted_atomic == null ? null : BigInt(r.fee_counted_atomic),
      feeBps: r.fee_bps ?? null,
    },
    chainById(chains, r.chain_id),
  );
}
