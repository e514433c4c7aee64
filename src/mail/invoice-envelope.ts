// The envelope shared by the invoice email and the reminders: To the customer, Reply-To the
// merchant, the PDF attached.
import type { Config } from '../config.js';
import type { InvoiceForMail } from '../db/invoice-for-mail.js';
import type { RenderedEmail } from './render-email.js';
import type { OutgoingMail } from './transport.js';

export function invoiceEnvelope(
  config: Pick<Config, 'mailFrom'>,
  loaded: InvoiceForMail,
  email: RenderedEmail,
  pdf: Buffer,
  messageId: string,
  /** The attachment's name: the invoice, or its receipt. */
  document: 'invoice' | 'receipt' = 'invoice',
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
    attachments: [{ filename: `${document}-${doc.code}.pdf`, content: pdf, contentType: 'application/pdf' }],
    // Sandbox mail is routed to capture only (SANDBOX_SMTP_URL or the outbox), never to SMTP_URL.
    environment: loaded.environment,
  };
}
