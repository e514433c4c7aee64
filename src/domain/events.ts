// Event kinds (a contract: merchants filter and switch on these names) and the rules that only
// depend on them: which endpoint wants which event.

export const EVENT_TYPES = [
  'invoice.created',
  'invoice.updated',
  'invoice.sent',
  'invoice.overdue',
  'invoice.paid',
  'invoice.voided',
  'invoice.reminder_sent',
  'invoice.email_failed',
  'payment_link.created',
  'payment_link.updated',
  'payment_link.deleted',
  'product.created',
  'product.updated',
  'subscription.created',
  'credential.revoked',
  'invoice.partially_paid',
  'payment.pending',
  'payment.confirmed',
  'payment.removed',
  'payment.applied',
  'payment.reorged_out',
  'subscription.past_due',
  'subscription.canceled',
  'subscription.ended',
  'invoice.payment_failed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** What an endpoint subscribes to: every kind, or a list of kinds. */
export const ALL_EVENTS = '*';

export function isEventType(s: string): s is EventType {
  return (EVENT_TYPES as readonly string[]).includes(s);
}

/** An endpoint's `enabled_events`: ["*"] or known kinds, at least one, no duplicates. */
export function checkEnabledEvents(list: string[]): { ok: true; value: string[] } | { ok: false; message: string } {
  if (list.length === 0) return { ok: false, message: 'enabled_events must list at least one event type, or "*" for all.' };
  if (list.includes(ALL_EVENTS)) {
    if (list.length > 1) return { ok: false, message: 'enabled_events "*" already means every event type; list it alone.' };
    return { ok: true, value: [ALL_EVENTS] };
  }
  const unknown = list.filter((t) => !isEventType(t));
  if (unknown.length > 0) return { ok: false, message: `Unknown event type ${JSON.stringify(unknown[0])}; see GET /v1/events types in the documentation.` };
  return { ok: true, value: [...new Set(list)] };
}

export function endpointWants(enabledEvents: readonly string[], type: string): boolean {
  return enabledEvents.includes(ALL_EVENTS) || enabledEvents.includes(type);
}
