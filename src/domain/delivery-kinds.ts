// Every email the service sends about an invoice, by kind: the invoice itself, the reminders
// before and after its due date, the acknowledgement of each partial payment, the receipt once paid, and each failed charge attempt of a subscription's period. Each kind is a delivery row (deliveries.kind: its check
// constraint holds this list, test/integration/rules-parity.test.ts compares them), a pair of
// email templates, and a metrics label.
export const DELIVERY_KINDS = ['invoice', 'reminder_before', 'reminder_after', 'receipt', 'partial_payment', 'payment_failed'] as const;
export type DeliveryKind = (typeof DELIVERY_KINDS)[number];
export type ReminderKind = Extract<DeliveryKind, 'reminder_before' | 'reminder_after'>;

