// Every email the service sends about an invoice, by kind: the invoice itself, and the reminders
// before and after its due date. Each kind is a delivery row (deliveries.kind: its check
// constraint holds this list, test/integration/rules-parity.test.ts compares them), a pair of
// email templates, and a metrics label.
export const DELIVERY_KINDS = ['invoice', 'reminder_before', 'reminder_after'] as const;
export type DeliveryKind = (typeof DELIVERY_KINDS)[number];
export type ReminderKind = Exclude<DeliveryKind, 'invoice'>;

