/**
 * Message-ID of a delivery: derived from the delivery id alone, so every attempt of one email
 * carries the same id and a downstream system can drop duplicates.
 */
export function messageIdFor(deliveryId: string, mailFrom: string): string {
  const domain = /@([A-Za-z0-9.-]+)/.exec(mailFrom)?.[1] ?? 'invoices.local';
  return `<${deliveryId}@${domain}>`;
}
