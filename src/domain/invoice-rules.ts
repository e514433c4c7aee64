// The invoice's rules as plain functions: which transitions exist, what an edit may contain, and
// how the total follows from the amount and the line items. No I/O; the routes apply them.
import type { Decimal } from 'decimal.js';
import { formatDecimal, MAX_INTEGER_DIGITS, Money, parseAmount, sumLines, type AmountCheck } from './money.js';

/**
 * Every invoice status. The SQL enum invoice_status and the API schemas hold the same list (the
 * schemas are built from this one; test/integration/rules-parity.test.ts compares the enum).
 */
export const INVOICE_STATUSES = ['draft', 'open', 'paid', 'overdue', 'void'] as const;
export type InvoiceStatus = (typeof INVOICE_STATUSES)[number];
export type InvoiceEvent = 'edit' | 'send' | 'pay' | 'mark_overdue' | 'set_reminders' | 'void';

export type Verdict<T = void> = { ok: true; value: T } | { ok: false; code: RuleCode; message: string };
export type RuleCode =
  | 'invoice_not_editable'
  | 'invoice_already_sent'
  | 'invoice_amount_missing'
  | 'invoice_not_payable'
  | 'invoice_reminders_closed'
  | 'invoice_not_voidable'
  | 'invoice_not_deletable'
  | 'amount_mismatch'
  | Extract<AmountCheck, { ok: false }>['code'];

const ok = <T>(value: T): Verdict<T> => ({ ok: true, value });
const no = (code: RuleCode, message: string): Verdict<never> => ({ ok: false, code, message });

/**
 * Where each event leads from each status; absent means refused. The conditional updates in
 * src/db (markSent, markVoid, markOverdue, updateDraft) and, for a payment, applyPaymentTo on the
 * locked row guard the same transitions; test/integration/rules-parity.test.ts runs every event from every status against a real
 * database and checks both give the same answer.
 */
export const TRANSITIONS: Readonly<Record<InvoiceEvent, Partial<Record<InvoiceStatus, InvoiceStatus>>>> = {
  edit: { draft: 'draft' },
  send: { draft: 'open' },
  pay: { open: 'paid', overdue: 'paid' },
  mark_overdue: { open: 'overdue' },
  set_reminders: { draft: 'draft', open: 'open', overdue: 'overdue' },
  // A sent invoice that will not be paid. A draft is deleted instead (see canDelete); a paid
  // one stays paid.
  void: { open: 'void', overdue: 'void' },
};

const REFUSALS: Record<InvoiceEvent, RuleCode> = {
  edit: 'invoice_not_editable',
  send: 'invoice_already_sent',
  pay: 'invoice_not_payable',
  mark_overdue: 'invoice_not_payable',
  set_reminders: 'invoice_reminders_closed',
  void: 'invoice_not_voidable',
};

export function nextStatus(status: InvoiceStatus, event: InvoiceEvent): Verdict<InvoiceStatus> {
  const next = TRANSITIONS[event][status];
  if (next) return ok(next);
  const messages: Record<InvoiceEvent, string> = {
    edit: `This invoice is ${status}; only a draft invoice can be changed.`,
    send: status === 'void' ? 'This invoice is void and cannot be sent.' : `This invoice was already sent (it is ${status}).`,
    pay: `This invoice is ${status}; only an open or overdue invoice can be paid.`,
    mark_overdue: `This invoice is ${status}; only an open invoice can become overdue.`,
    set_reminders: `This invoice is ${status}; reminders can only be changed on a draft, open or overdue invoice.`,
    void:
      status === 'draft'
        ? 'This invoice is a draft; delete it instead of voiding it (only an open or overdue invoice can be voided).'
        : `This invoice is ${status}; only an open or overdue invoice can be voided.`,
  };
  return no(REFUSALS[event], messages[event]);
}

const DELETABLE_STATUSES: readonly InvoiceStatus[] = ['draft'];

/**
 * Only a draft can be deleted: it holds no number yet, so the numbering of sent invoices stays
 * gap-free, and nothing was emailed about it.
 */
export function canDelete(status: InvoiceStatus): Verdict<void> {
  if (DELETABLE_STATUSES.includes(status)) return ok(undefined);
  return no(
    'invoice_not_deletable',
    status === 'open' || status === 'overdue'
      ? `This invoice is ${status}; a sent invoice cannot be deleted, void it instead.`
      : `This invoice is ${status}; only a draft invoice can be deleted.`,
  );
}

/**
 * Reminders run only for a sent, unpaid invoice that has them on and has a due date. In SQL this
 * is the function invoice_reminders_run (migration 1700000000900), used by the queries and the
 * stop trigger; the parity test checks both for every status and flag.
 */
export function remindersShouldRun(inv: { status: InvoiceStatus; remindersEnabled: boolean; dueAt: Date | null }): boolean {
  return (inv.status === 'open' || inv.status === 'overdue') && inv.remindersEnabled && inv.dueAt !== null;
}

export interface LineItemInput {
  description: string;
  quantity: number;
  unit_amount: string;
}

export interface ParsedLine {
  description: string;
  quantity: number;
  unitAmount: Decimal;
}

export interface AmountEdit {
  /** New total, or null when the edit leaves the invoice without one. undefined: unchanged. */
  amount?: Decimal | null;
  /** New line items (replacing all), or undefined: unchanged. */
  lines?: ParsedLine[];
}

/**
 * Resolves the total from an edit. The total of an invoice with line items is always their sum:
 * `amount` and `line_items` given together must agree; `amount` alone on an invoice that has
 * line items must equal their sum (send `line_items: []` to drop them); `line_items` alone set
 * the total.
 */
export function resolveAmountEdit(
  input: { amount?: string; line_items?: LineItemInput[] },
  decimals: number,
  currentLines: ParsedLine[],
): Verdict<AmountEdit> {
  let amount: Decimal | undefined;
  if (input.amount !== undefined) {
    const parsed = parseAmount(input.amount, decimals);
    if (!parsed.ok) return parsed;
    amount = parsed.value;
  }
  let lines: ParsedLine[] | undefined;
  if (input.line_items !== undefined) {
    lines = [];
    for (const [i, item] of input.line_items.entries()) {
      const parsed = parseAmount(item.unit_amount, decimals, `line_items[${i}].unit_amount`, true);
      if (!parsed.ok) return parsed;
      lines.push({ description: item.description, quantity: item.quantity, unitAmount: parsed.value });
    }
  }
  const effectiveLines = lines ?? currentLines;
  if (effectiveLines.length > 0) {
    const sum = sumLines(effectiveLines);
    if (amount !== undefined && !amount.equals(sum)) {
      return no(
        'amount_mismatch',
        `amount ${formatDecimal(amount)} does not equal the sum of the line items, ${formatDecimal(sum)}.`,
      );
    }
    if (sum.isZero()) return no('amount_not_positive', 'The line items add up to zero; an invoice total must be greater than zero.');
    // The total obeys the same bound as an amount given directly (quantity x unit can exceed it).
    if (sum.gte(new Money(10).pow(MAX_INTEGER_DIGITS))) {
      return no('amount_too_large', `The line items add up to ${formatDecimal(sum)}; an invoice total must be below 10^${MAX_INTEGER_DIGITS}.`);
    }
    return ok({ amount: sum, lines });
  }
  // `line_items: []` drops the lines: a total that came from them goes with them, a plain
  // amount of an invoice that had no lines stays.
  if (lines !== undefined) return ok({ amount: amount ?? (currentLines.length > 0 ? null : undefined), lines });
  return ok(amount === undefined ? {} : { amount });
}
