// The reminder timeline of GET /v1/invoices/{id}/reminders: what was sent, and what the policy
// plans next.
import { findCustomerTimeZone } from '../db/customers.js';
import { listDeliveries } from '../db/deliveries.js';
import type { InvoiceRow } from '../db/invoices.js';
import { remindersShouldRun } from '../domain/invoice-rules.js';
import { futureReminderSlots, reminderKindOf } from '../domain/reminder-schedule.js';
import type { AppDeps } from './types.js';

export async function buildReminderTimeline(deps: Pick<AppDeps, 'pool' | 'config'>, inv: InvoiceRow, accountTimeZone: string) {
  const [deliveries, customerZone] = await Promise.all([listDeliveries(deps.pool, inv.id), findCustomerTimeZone(deps.pool, inv.customer_id)]);
  const timeZone = customerZone ?? accountTimeZone;
  const running = remindersShouldRun({ status: inv.status, remindersEnabled: inv.reminders_enabled, dueAt: inv.due_at });
  const upcoming = running && inv.due_at
    ? futureReminderSlots(deps.config.reminders, inv.due_at, timeZone, new Date())
        .map((s) => ({ kind: reminderKindOf(s.phase), scheduled_for: s.at.toISOString() }))
    : [];
  return {
    invoice_id: inv.id,
    reminders_enabled: inv.reminders_enabled,
    status: inv.status,
    due_at: inv.due_at ? inv.due_at.toISOString() : null,
    time_zone: timeZone,
    past: deliveries
      .filter((d) => d.kind === 'reminder_before' || d.kind === 'reminder_after')
      .map((d) => ({
        kind: d.kind,
        scheduled_for: d.slot_at.toISOString(),
        status: d.status,
        attempt: d.attempt,
        sent_at: d.sent_at ? d.sent_at.toISOString() : null,
        error: d.error,
      })),
    upcoming,
  };
}
