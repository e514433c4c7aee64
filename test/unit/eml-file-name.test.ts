import { describe, expect, it } from 'vitest';
import { emlFileName } from '../../src/mail/invoice-envelope.js';
import { outboxFileName } from '../../src/mail/transport.js';

describe('.eml file names', () => {
  it('name the invoice code, the kind, a reminder its slot, and end with the delivery id', () => {
    expect(outboxFileName(emlFileName('INV-000001', 'invoice', 'dlv_a1B2'))).toBe('INV-000001-invoice-dlv_a1B2.eml');
    expect(outboxFileName(emlFileName('TEST-INV-000001', 'receipt', 'dlv_c3'))).toBe('TEST-INV-000001-receipt-dlv_c3.eml');
    expect(outboxFileName(emlFileName('INV-000001', 'reminder_before', 'dlv_d4', new Date('2026-11-25T09:00:00.000Z')))).toBe(
      'INV-000001-reminder_before-2026-11-25T09-00-00Z-dlv_d4.eml',
    );
  });

  it('differ for two reminders seconds apart, and for two merchants\' INV-000001', () => {
    const a = emlFileName('INV-000001', 'reminder_after', 'dlv_1', new Date('2026-11-25T09:00:00Z'));
    const b = emlFileName('INV-000001', 'reminder_after', 'dlv_2', new Date('2026-11-25T09:00:10Z'));
    expect(a).not.toBe(b);
    expect(emlFileName('INV-000001', 'invoice', 'dlv_1')).not.toBe(emlFileName('INV-000001', 'invoice', 'dlv_2'));
  });

  it('stay filesystem-safe whatever the code holds', () => {
    // No separator, no leading dot: the file stays in the outbox folder and visible.
    expect(outboxFileName(emlFileName('../x/INV 1', 'invoice', 'dlv_1'))).toBe('__x_INV_1-invoice-dlv_1.eml');
  });
});
