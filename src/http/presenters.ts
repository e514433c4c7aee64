// Rows to API objects: exactly the fields of the spec's resources, timestamps as ISO strings,
// absent values as null. Each presenter returns its schema's Static type, so a field the schema
// and the presenter disagree on fails to compile.
import type { Config } from '../config.js';
import type { CredentialRow } from '../db/credentials.js';
import type { InvoiceRow } from '../db/invoices.js';
import type { LinkPaymentRow, PaymentLinkRow } from '../db/payment-links.js';
import type { PriceRow, ProductRow } from '../db/products.js';
import type { SubscriptionRow } from '../db/subscriptions.js';
import type { EventRow } from '../db/events.js';
import type { WebhookDeliveryRow } from '../db/webhook-deliveries.js';
import type { WebhookEndpointRow } from '../db/webhook-endpoints.js';
import type { ChainRegistry } from '../domain/chains.js';
import { instructionsOfRow, remainingAtomic } from '../domain/payments.js';
import type { Static } from 'typebox';
import type { EventObject, WebhookDelivery, WebhookEndpoint } from './schemas/index.js';
import type { Credential, InvoiceObject, LinkPayment, PaymentLink, Price, Product, Subscription } from './schemas/index.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** `chains`: the deployment's, which give the invoice's payment instructions as its chain is configured now. */
export function presentInvoice(r: InvoiceRow, chains: ChainRegistry): InvoiceObject {
  return {
    id: r.id,
    code: r.code,
    reference: r.reference,
    status: r.status,
    amount: r.amount,
    amount_atomic: r.amount_atomic,
    fee_atomic: r.fee_atomic,
    currency: r.currency,
    network: r.network,
    chain_id: r.chain_id,
    period_start: iso(r.period_start),
    period_end: iso(r.period_end),
    attempt_count: r.attempt_count,
    next_attempt_at: iso(r.next_attempt_at),
    paid_at: iso(r.paid_at),
    sent_at: iso(r.sent_at),
    reminders_enabled: r.reminders_enabled,
    last_reminder_at: iso(r.last_reminder_at),
    failure_code: r.failure_code,
    failure_message: r.failure_message,
    metadata: r.metadata,
    amount_paid_atomic: r.amount_paid_atomic ?? '0',
    amount_remaining_atomic: r.amount_atomic === null ? null : remainingAtomic({ amountAtomic: BigInt(r.amount_atomic), paidAtomic: BigInt(r.amount_paid_atomic ?? '0') }).toString(),
    payment_instructions: instructionsOfRow(r, chains),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export function presentPrice(p: PriceRow): Static<typeof Price> {
  return { ...p, created_at: p.created_at.toISOString(), updated_at: p.updated_at.toISOString() };
}

export function presentProduct(p: ProductRow): Static<typeof Product> {
  return {
    id: p.id,
    name: p.name,
    description: p.description,
    active: p.active,
    deletable: p.deletable,
    metadata: p.metadata,
    prices: p.prices.map(presentPrice),
    created_at: p.created_at.toISOString(),
    updated_at: p.updated_at.toISOString(),
  };
}

export function presentLink(l: PaymentLinkRow, config: Pick<Config, 'paymentPageBase'>): Static<typeof PaymentLink> {
  return {
    id: l.id,
    name: l.name,
    type: l.type,
    status: l.status,
    url: `${config.paymentPageBase}/${l.id}`,
    price_id: l.price_id,
    min_amount: l.min_amount,
    max_amount: l.max_amount,
    preset_amount: l.preset_amount,
    collect_email: l.collect_email,
    collect_name: l.collect_name,
    collect_phone: l.collect_phone,
    collect_address: l.collect_address,
    max_payments: l.max_payments,
    payment_count: l.payment_count,
    after_completion: l.after_completion,
    confirmation_message: l.confirmation_message,
    redirect_url: l.redirect_url,
    fee_payer: l.fee_payer,
    created_at: l.created_at.toISOString(),
    updated_at: l.updated_at.toISOString(),
  };
}

export function presentLinkPayment(p: LinkPaymentRow): Static<typeof LinkPayment> {
  return { ...p, created_at: p.created_at.toISOString() };
}

export function presentSubscription(s: SubscriptionRow): Static<typeof Subscription> {
  return {
    id: s.id,
    status: s.status,
    mode: s.mode,
    amount: s.amount,
    amount_atomic: s.amount_atomic,
    currency: s.currency,
    cadence: s.cadence,
    interval_seconds: s.interval_seconds,
    network: s.network,
    chain_id: s.chain_id,
    contract_address: s.contract_address,
    onchain_id: s.onchain_id,
    platform_fee_bps: s.platform_fee_bps,
    started_at: s.started_at.toISOString(),
    current_period_start: s.current_period_start.toISOString(),
    next_charge_at: iso(s.next_charge_at),
    ends_at: iso(s.ends_at),
    customer_id: s.customer_id,
    customer_email: s.customer_email,
    price_id: s.price_id,
    subscriber_address: s.subscriber_address,
    canceled_at: iso(s.canceled_at),
    canceled_by: s.canceled_by,
  };
}

export function presentCredential(c: CredentialRow, secret?: string): Static<typeof Credential> {
  return {
    id: c.id,
    name: c.name,
    permission: c.permission,
    environment: c.environment,
    last4: c.secret_last4,
    revoked: c.revoked_at !== null,
    revoked_at: iso(c.revoked_at),
    created_at: c.created_at.toISOString(),
    ...(secret === undefined ? {} : { secret }),
  };
}

/**
 * An event: data.object is the object as the API presents it. Invoice events hold the invoice
 * row as it was and go through the same presenter as GET /v1/invoices/{id}.
 */
export function presentEvent(e: EventRow, chains: ChainRegistry): EventObject {
  const object = e.object ?? (e.invoice ? presentInvoice(e.invoice, chains) : {});
  return { id: e.id, type: e.type, created_at: e.created_at.toISOString(), environment: e.environment, data: { object } };
}

export function presentWebhookEndpoint(w: WebhookEndpointRow, secret?: string): Static<typeof WebhookEndpoint> {
  return {
    id: w.id,
    url: w.url,
    description: w.description,
    enabled_events: w.enabled_events,
    status: w.status,
    disabled_reason: w.disabled_reason,
    environment: w.environment,
    previous_secret_expires_at: w.previous_secret_expires_at && w.previous_secret_expires_at > new Date() ? w.previous_secret_expires_at.toISOString() : null,
    created_at: w.created_at.toISOString(),
    updated_at: w.updated_at.toISOString(),
    ...(secret === undefined ? {} : { secret }),
  };
}

export function presentWebhookDelivery(d: WebhookDeliveryRow): Static<typeof WebhookDelivery> {
  return {
    id: d.id,
    event_id: d.event_id,
    event_type: d.event_type,
    endpoint_id: d.endpoint_id,
    status: d.status,
    attempt_count: d.attempt_count,
    last_status_code: d.last_status_code,
    last_error: d.last_error,
    last_duration_ms: d.last_duration_ms,
    next_retry_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
    succeeded_at: iso(d.succeeded_at),
    created_at: d.created_at.toISOString(),
    attempts: d.attempts.map((a) => ({ ...a, started_at: a.started_at.toISOString() })),
  };
}
