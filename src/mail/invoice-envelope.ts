// The envelope shared by the invoice email and the reminders: To the customer, Reply-To the
// merchant, the PDF attached (the acknowledgement of a partial payment attaches none).
import type { Config } from '../config.js';
import type { InvoiceForMail } from '../db/invoice-for-mail.js';
import type { EmailKind, RenderedEmail } from './render-email.js';
import type { OutgoingMail } from './transport.js';

/**
 * The .eml name of an invoice document email, for a person looking in the outbox folder:
 * `INV-000001-invoice-dlv_...`, `INV-000001-reminder_before-2026-11-25T09-00-00Z-dlv_...`. The
 * delivery id makes it unique (another merchant has an INV-000001 too) and stable across retries.
 */
export function emlFileName(code: string, kind: EmailKind, deliveryId: string, slotAt?: Date): string {
  const slot = slotAt ? `-${slotAt.toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/:/g, '-')}` : '';
  return `${code}-${kind}${slot}-${deliveryId}`;
}

export function invoiceEnvelope(
  config: Pick<Config, 'mailFrom'>,
  loaded: InvoiceForMail,
  email: RenderedEmail,
  pdf: Buffer | null,
  messageId: string,
  /** The attachment's name: the invoice, or its receipt. */
  document: 'invoice' | 'receipt' = 'invoice',
  /** Its .eml name in the outbox folder (emlFileName). */
  fileName?: string,
): OutgoingMail {
  const { doc } = loaded;
  return {
    from: config.mailFrom,
    to: doc.customer.name ? `"${doc.customer.name.replace(/["\\\r\n]/g, '')}" <${doc.customer.email}>` : doc.customer.email,
    ...(loaded.merchantEmail ? { replyTo: loaded.merchantEmail } : {}),
    subject: email.subject,
    html: email.html,
    text: email.text,
    messageId,
    ...(fileName ? { fileName } : {}),
    attachments: pdf ? [{ filename: `${document}-${doc.code}.pdf`, content: pdf, contentType: 'application/pdf' }] : [],
    // Sandbox mail is routed to capture only (SANDBOX_SMTP_URL or the outbox), never to SMTP_URL.
    environment: loaded.environment,
  };
}
