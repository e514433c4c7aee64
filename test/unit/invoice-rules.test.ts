import { describe, expect, it } from 'vitest';
import {
  canDelete,
  nextStatus,
  remindersShouldRun,
  resolveAmountEdit,
  type InvoiceEvent,
  type InvoiceStatus,
  type ParsedLine,
} from '../../src/domain/invoice-rules.js';
import { formatDecimal, Money } from '../../src/domain/money.js';

const STATUSES: InvoiceStatus[] = ['draft', 'open', 'paid', 'overdue', 'void'];

// The whole transition table: [event, from, to | refusal code].
const TABLE: Record<InvoiceEvent, Record<InvoiceStatus, string>> = {
  edit: { draft: 'draft', open: 'invoice_not_editable', paid: 'invoice_not_editable', overdue: 'invoice_not_editable', void: 'invoice_not_editable' },
  send: { draft: 'open', open: 'invoice_already_sent', paid: 'invoice_already_sent', overdue: 'invoice_already_sent', void: 'invoice_already_sent' },
  pay: { draft: 'invoice_not_payable', open: 'paid', paid: 'invoice_not_payable', overdue: 'paid', void: 'invoice_not_payable' },
  mark_overdue: { draft: 'invoice_not_payable', open: 'overdue', paid: 'invoice_not_payable', overdue: 'invoice_not_payable', void: 'invoice_not_payable' },
  set_reminders: { draft: 'draft', open: 'open', paid: 'invoice_reminders_closed', overdue: 'overdue', void: 'invoice_reminders_closed' },
  void: { draft: 'invoice_not_voidable', open: 'void', paid: 'invoice_not_voidable', overdue: 'void', void: 'invoice_not_voidable' },
};

describe('canDelete', () => {
  it('deletes a draft only; a sent invoice is told to void instead', () => {
    expect(canDelete('draft')).toEqual({ ok: true, value: undefined });
    for (const status of ['open', 'paid', 'overdue', 'void'] as const) {
      const v = canDelete(status);
      expect(v.ok ? 'allowed' : v.code).toBe('invoice_not_deletable');
    }
    const open = canDelete('open');
    expect(!open.ok && open.message).toContain('void it');
  });

  it('tells a draft to be deleted rather than voided', () => {
    const v = nextStatus('draft', 'void');
    expect(!v.ok && v.message).toContain('delete');
  });
});

describe('nextStatus', () => {
  for (const [event, row] of Object.entries(TABLE) as [InvoiceEvent, Record<InvoiceStatus, string>][]) {
    for (const from of STATUSES) {
      const expected = row[from];
      const allowed = (STATUSES as string[]).includes(expected);
      it(`${event} from ${from}: ${allowed ? `-> ${expected}` : `refused (${expected})`}`, () => {
        const v = nextStatus(from, event);
        if (allowed) {
          expect(v).toEqual({ ok: true, value: expected });
        } else {
          expect(v.ok).toBe(false);
          if (!v.ok) {
            expect(v.code).toBe(expected);
            expect(v.message.length).toBeGreaterThan(0);
          }
        }
      });
    }
  }

  it('says a void invoice cannot be sent, and names the status of a sent one', () => {
    const v = nextStatus('void', 'send');
    expect(!v.ok && v.message).toContain('void');
    const o = nextStatus('overdue', 'edit');
    expect(!o.ok && o.message).toContain('overdue');
  });
});

describe('remindersShouldRun', () => {
  const due = new Date('2030-01-01T00:00:00Z');
  it('runs only for open/overdue invoices with reminders on and a due date', () => {
    expect(remindersShouldRun({ status: 'open', remindersEnabled: true, dueAt: due })).toBe(true);
    expect(remindersShouldRun({ status: 'overdue', remindersEnabled: true, dueAt: due })).toBe(true);
    for (const status of ['draft', 'paid', 'void'] as const) {
      expect(remindersShouldRun({ status, remindersEnabled: true, dueAt: due })).toBe(false);
    }
    expect(remindersShouldRun({ status: 'open', remindersEnabled: false, dueAt: due })).toBe(false);
    expect(remindersShouldRun({ status: 'open', remindersEnabled: true, dueAt: null })).toBe(false);
  });
});

const line = (quantity: number, unit: string, description = 'item'): ParsedLine => ({ description, quantity, unitAmount: new Money(unit) });
const item = (quantity: number, unit_amount: string, description = 'item') => ({ description, quantity, unit_amount });

function okEdit(v: ReturnType<typeof resolveAmountEdit>) {
  if (!v.ok) throw new Error(`expected ok, got ${v.code}: ${v.message}`);
  return {
    amount: v.value.amount === undefined ? undefined : v.value.amount === null ? null : formatDecimal(v.value.amount),
    lines: v.value.lines?.map((l) => ({ description: l.description, quantity: l.quantity, unit: formatDecimal(l.unitAmount) })),
  };
}
const refusal = (v: ReturnType<typeof resolveAmountEdit>) => (v.ok ? 'ok' : v.code);

describe('resolveAmountEdit', () => {
  it('an empty edit changes nothing', () => {
    expect(okEdit(resolveAmountEdit({}, 6, []))).toEqual({ amount: undefined, lines: undefined });
    expect(okEdit(resolveAmountEdit({}, 6, [line(1, '5')]))).toEqual({ amount: '5', lines: undefined });
  });

  it('amount alone on an invoice without lines sets the total', () => {
    expect(okEdit(resolveAmountEdit({ amount: '12.50' }, 6, []))).toEqual({ amount: '12.5', lines: undefined });
  });

  it('line_items alone set the total to their sum', () => {
    const r = okEdit(resolveAmountEdit({ line_items: [item(2, '10.25', 'a'), item(3, '0.1', 'b')] }, 6, []));
    expect(r.amount).toBe('20.8');
    expect(r.lines).toEqual([
      { description: 'a', quantity: 2, unit: '10.25' },
      { description: 'b', quantity: 3, unit: '0.1' },
    ]);
  });

  it('amount and line_items together must agree', () => {
    expect(okEdit(resolveAmountEdit({ amount: '20.80', line_items: [item(2, '10.25'), item(3, '0.1')] }, 6, [])).amount).toBe('20.8');
    const v = resolveAmountEdit({ amount: '20', line_items: [item(2, '10.25'), item(3, '0.1')] }, 6, []);
    expect(refusal(v)).toBe('amount_mismatch');
    expect(!v.ok && v.message).toContain('20.8');
  });

  it('amount alone on an invoice with lines must equal their sum', () => {
    const current = [line(2, '5')];
    expect(refusal(resolveAmountEdit({ amount: '11' }, 6, current))).toBe('amount_mismatch');
    expect(okEdit(resolveAmountEdit({ amount: '10.000' }, 6, current))).toEqual({ amount: '10', lines: undefined });
  });

  it('new line_items replace the current ones for the check', () => {
    const current = [line(2, '5')];
    expect(okEdit(resolveAmountEdit({ amount: '3', line_items: [item(1, '3')] }, 6, current)).amount).toBe('3');
    expect(refusal(resolveAmountEdit({ amount: '10', line_items: [item(1, '3')] }, 6, current))).toBe('amount_mismatch');
  });

  it('line_items: [] drops the lines; with an amount the amount is the total', () => {
    expect(okEdit(resolveAmountEdit({ amount: '7', line_items: [] }, 6, [line(2, '5')]))).toEqual({ amount: '7', lines: [] });
    expect(okEdit(resolveAmountEdit({ line_items: [] }, 6, [line(2, '5')]))).toEqual({ amount: null, lines: [] });
    // A plain amount of an invoice that had no lines is not wiped by an empty list.
    const kept = resolveAmountEdit({ line_items: [] }, 6, []);
    expect(kept.ok && kept.value.amount).toBeUndefined();
  });

  it('refuses lines that add up to zero, but accepts a zero-priced line among others', () => {
    expect(refusal(resolveAmountEdit({ line_items: [item(1, '0'), item(5, '0.00')] }, 6, []))).toBe('amount_not_positive');
    expect(okEdit(resolveAmountEdit({ line_items: [item(1, '0'), item(2, '1.5')] }, 6, [])).amount).toBe('3');
  });

  it('checks the amount and every unit_amount with the token precision', () => {
    expect(refusal(resolveAmountEdit({ amount: '1.0000001' }, 6, []))).toBe('amount_too_precise');
    expect(okEdit(resolveAmountEdit({ amount: '1.0000001' }, 18, [])).amount).toBe('1.0000001');
    const v = resolveAmountEdit({ line_items: [item(1, '1'), item(1, '0.0000001')] }, 6, []);
    expect(refusal(v)).toBe('amount_too_precise');
    expect(!v.ok && v.message).toContain('line_items[1].unit_amount');
    expect(refusal(resolveAmountEdit({ amount: '0' }, 6, []))).toBe('amount_not_positive');
    expect(refusal(resolveAmountEdit({ amount: '1e3' }, 6, []))).toBe('amount_invalid');
    expect(refusal(resolveAmountEdit({ line_items: [item(1, '-1')] }, 6, []))).toBe('amount_invalid');
    expect(refusal(resolveAmountEdit({ amount: '1000000000000000' }, 6, []))).toBe('amount_too_large');
  });

  it('refuses a line-item total above the amount bound, like an amount would be', () => {
    // 1 000 000 x 999 999 999 999 999 is far above 10^15: the same bound as a plain amount.
    expect(refusal(resolveAmountEdit({ line_items: [item(1_000_000, '999999999999999')] }, 6, []))).toBe('amount_too_large');
    expect(refusal(resolveAmountEdit({ line_items: [item(1, '999999999999999'), item(1, '1')] }, 6, []))).toBe('amount_too_large');
    expect(okEdit(resolveAmountEdit({ line_items: [item(1, '999999999999998'), item(1, '1')] }, 6, [])).amount).toBe('999999999999999');
  });
});
