// The OpenAPI operationId of every v1 route, in one table: generated clients name their methods
// after these, so they are part of the contract and never derived from something that may move
// (a summary, a file). A route missing here gets one derived from its method and path (see
// operationIdFor), so the document stays valid, and the OpenAPI test lists it.
export const OPERATION_IDS: Readonly<Record<string, string>> = {
  'POST /v1/invoices': 'createInvoice',
  'GET /v1/invoices': 'listInvoices',
  'GET /v1/invoices/{invoiceId}': 'retrieveInvoice',
  'PATCH /v1/invoices/{invoiceId}': 'updateInvoice',
  'DELETE /v1/invoices/{invoiceId}': 'deleteInvoice',
  'POST /v1/invoices/{invoiceId}/send': 'sendInvoice',
  'POST /v1/invoices/{invoiceId}/void': 'voidInvoice',
  'POST /v1/invoices/{invoiceId}/reminders': 'setInvoiceReminders',
  'GET /v1/invoices/{invoiceId}/reminders': 'retrieveInvoiceReminderTimeline',
  'GET /v1/invoices/{invoiceId}/lines': 'listInvoiceLines',
  'GET /v1/invoices/{invoiceId}/pdf': 'downloadInvoicePdf',
  'POST /v1/payment-links': 'createPaymentLink',
  'GET /v1/payment-links': 'listPaymentLinks',
  'GET /v1/payment-links/{paymentLinkId}': 'retrievePaymentLink',
  'PATCH /v1/payment-links/{paymentLinkId}': 'updatePaymentLink',
  'DELETE /v1/payment-links/{paymentLinkId}': 'deletePaymentLink',
  'POST /v1/products': 'createProduct',
  'GET /v1/products': 'listProducts',
  'GET /v1/products/{productId}': 'retrieveProduct',
  'PATCH /v1/products/{productId}': 'updateProduct',
  'DELETE /v1/products/{productId}': 'deleteProduct',
  'GET /v1/subscriptions': 'listSubscriptions',
  'GET /v1/subscriptions/{subscriptionId}': 'retrieveSubscription',
  'GET /v1/subscriptions/{subscriptionId}/invoices': 'listSubscriptionInvoices',
  'POST /v1/subscriptions/{subscriptionId}/cancel': 'cancelSubscription',
  'POST /v1/credentials': 'createCredential',
  'GET /v1/credentials': 'listCredentials',
  'DELETE /v1/credentials/{credentialId}': 'revokeCredential',
  'POST /v1/test_helpers/invoices/{invoiceId}/pay': 'testHelpersPayInvoice',
  'POST /v1/test_helpers/payment-links/{paymentLinkId}/payments': 'testHelpersCreatePaymentLinkPayment',
  'GET /v1/events': 'listEvents',
  'GET /v1/events/{eventId}': 'retrieveEvent',
  'POST /v1/webhook_endpoints': 'createWebhookEndpoint',
  'GET /v1/webhook_endpoints': 'listWebhookEndpoints',
  'GET /v1/webhook_endpoints/{endpointId}': 'retrieveWebhookEndpoint',
  'PATCH /v1/webhook_endpoints/{endpointId}': 'updateWebhookEndpoint',
  'DELETE /v1/webhook_endpoints/{endpointId}': 'deleteWebhookEndpoint',
  'POST /v1/webhook_endpoints/{endpointId}/rotate_secret': 'rotateWebhookEndpointSecret',
  'GET /v1/webhook_endpoints/{endpointId}/deliveries': 'listWebhookDeliveries',
};

/** `/v1/invoices/:invoiceId` -> `/v1/invoices/{invoiceId}`, as the OpenAPI document writes paths. */
export function openApiPath(fastifyUrl: string): string {
  return fastifyUrl.replace(/:(\w+)/g, '{$1}');
}

/** The table's id, else one derived from method and path: `post_v1_webhooks_endpointId` style, camelCased. */
export function operationIdFor(method: string, fastifyUrl: string): string {
  const path = openApiPath(fastifyUrl);
  const known = OPERATION_IDS[`${method} ${path}`];
  if (known) return known;
  const words = [method.toLowerCase(), ...path.split(/[^A-Za-z0-9]+/).filter((w) => w && w !== 'v1')];
  return words.map((w, i) => (i === 0 ? w : w[0].toUpperCase() + w.slice(1))).join('');
}
