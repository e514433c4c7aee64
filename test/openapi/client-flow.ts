// A merchant's small flow written against the client generated from the OpenAPI document
// (openapi-typescript types, openapi-fetch calls): create, send, list, void. It type-checks only
// if the document describes these operations, parameters and bodies as the code uses them, and it
// runs only if the server answers as the document says.
import { randomUUID } from 'node:crypto';
import createClient from 'openapi-fetch';
import type { paths } from './generated/api.js';

export interface FlowResult {
  invoiceId: string;
  createdStatus: string;
  replayedHeader: string | null;
  replayedSameId: boolean;
  sentStatus: string;
  sentCode: string | null;
  listedIds: string[];
  hasMore: boolean;
  voidedStatus: string;
  refusedStatus: number;
  refusedCode: string | undefined;
  pdfType: string | null;
  /** The on-chain side: the settlement address set and read back, the invoice's payments, the payment list. */
  settlementAddress: string | null;
  paymentInstructions: unknown;
  invoicePayments: number;
  unmatchedListed: number;
  missingPaymentCode: string | undefined;
  applyMissingCode: string | undefined;
}

export async function runInvoiceFlow(baseUrl: string, apiKey: string, customerEmail: string): Promise<FlowResult> {
  const client = createClient<paths>({ baseUrl, headers: { 'Api-Key': apiKey } });
  const idempotencyKey = randomUUID();

  const created = await client.POST('/v1/invoices', {
    params: { header: { 'Idempotency-Key': idempotencyKey } },
    body: { customer_email: customerEmail, line_items: [{ description: 'Typed client', quantity: 2, unit_amount: '21.25' }] },
  });
  if (!created.data) throw new Error(`create failed: ${created.response.status} ${JSON.stringify(created.error)}`);
  const invoiceId = created.data.data.id;

  const replayed = await client.POST('/v1/invoices', {
    params: { header: { 'Idempotency-Key': idempotencyKey } },
    body: { customer_email: customerEmail, line_items: [{ description: 'Typed client', quantity: 2, unit_amount: '21.25' }] },
  });

  const sent = await client.POST('/v1/invoices/{invoiceId}/send', { params: { path: { invoiceId } } });
  if (!sent.data) throw new Error(`send failed: ${sent.response.status} ${JSON.stringify(sent.error)}`);

  const listed = await client.GET('/v1/invoices', { params: { query: { limit: 5, status: 'open', customer_email: customerEmail } } });
  if (!listed.data) throw new Error(`list failed: ${listed.response.status} ${JSON.stringify(listed.error)}`);

  const voided = await client.POST('/v1/invoices/{invoiceId}/void', { params: { path: { invoiceId } } });
  if (!voided.data) throw new Error(`void failed: ${voided.response.status} ${JSON.stringify(voided.error)}`);

  const refused = await client.POST('/v1/invoices/{invoiceId}/void', { params: { path: { invoiceId } } });

  const pdf = await client.GET('/v1/invoices/{invoiceId}/pdf', { params: { path: { invoiceId } }, parseAs: 'arrayBuffer' });

  const patched = await client.PATCH('/v1/account', { body: { settlement_address: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8' } });
  if (!patched.data) throw new Error(`account failed: ${patched.response.status} ${JSON.stringify(patched.error)}`);
  const account = await client.GET('/v1/account');
  const payments = await client.GET('/v1/invoices/{invoiceId}/payments', { params: { path: { invoiceId } } });
  const unmatched = await client.GET('/v1/payments', { params: { query: { unmatched: 'true', limit: 10 } } });
  const missing = await client.GET('/v1/payments/{paymentId}', { params: { path: { paymentId: 'pay_missing' } } });
  const applyMissing = await client.POST('/v1/payments/{paymentId}/apply', { params: { path: { paymentId: 'pay_missing' } }, body: { invoice_id: invoiceId } });

  return {
    invoiceId,
    createdStatus: created.data.data.status,
    replayedHeader: replayed.response.headers.get('Idempotent-Replayed'),
    replayedSameId: replayed.data?.data.id === invoiceId,
    sentStatus: sent.data.data.status,
    sentCode: sent.data.data.code,
    listedIds: listed.data.data.map((inv) => inv.id),
    hasMore: listed.data.has_more,
    voidedStatus: voided.data.data.status,
    refusedStatus: refused.response.status,
    refusedCode: refused.error?.error.code,
    pdfType: pdf.response.headers.get('content-type'),
    settlementAddress: account.data?.data.settlement_address ?? null,
    paymentInstructions: sent.data.data.payment_instructions,
    invoicePayments: payments.data?.data.length ?? -1,
    unmatchedListed: unmatched.data?.data.length ?? -1,
    missingPaymentCode: missing.error?.error.code,
    applyMissingCode: applyMissing.error?.error.code,
  };
}

export interface SubscriptionFlowResult {
  retrievedStatus: string;
  retrievedEmail: string;
  listedIds: string[];
  invoiceCount: number;
  firstPeriodIndexStart: string | null;
  canceledStatus: string;
  canceledBy: string | null;
  refusedStatus: number;
  refusedCode: string | undefined;
  missingCode: string | undefined;
  badFilterStatus: number;
}

/** A merchant's look at a subscription through the generated client: retrieve, list, its invoices, cancel (twice). */
export async function runSubscriptionFlow(baseUrl: string, apiKey: string, subscriptionId: string, customerEmail: string): Promise<SubscriptionFlowResult> {
  const client = createClient<paths>({ baseUrl, headers: { 'Api-Key': apiKey } });
  const retrieved = await client.GET('/v1/subscriptions/{subscriptionId}', { params: { path: { subscriptionId } } });
  if (!retrieved.data) throw new Error(`retrieve failed: ${retrieved.response.status} ${JSON.stringify(retrieved.error)}`);
  const listed = await client.GET('/v1/subscriptions', { params: { query: { status: 'active', customer_email: customerEmail, limit: 10 } } });
  if (!listed.data) throw new Error(`list failed: ${listed.response.status} ${JSON.stringify(listed.error)}`);
  const invoices = await client.GET('/v1/subscriptions/{subscriptionId}/invoices', { params: { path: { subscriptionId }, query: { limit: 10 } } });
  if (!invoices.data) throw new Error(`invoices failed: ${invoices.response.status} ${JSON.stringify(invoices.error)}`);
  const canceled = await client.POST('/v1/subscriptions/{subscriptionId}/cancel', { params: { path: { subscriptionId } } });
  if (!canceled.data) throw new Error(`cancel failed: ${canceled.response.status} ${JSON.stringify(canceled.error)}`);
  const refused = await client.POST('/v1/subscriptions/{subscriptionId}/cancel', { params: { path: { subscriptionId } } });
  const missing = await client.GET('/v1/subscriptions/{subscriptionId}', { params: { path: { subscriptionId: 'sub_missing' } } });
  // A value outside the documented enumeration: the type says no, the server says 400.
  const badFilter = await client.GET('/v1/subscriptions', { params: { query: { status: 'paused' as 'active' } } });
  return {
    retrievedStatus: retrieved.data.data.status,
    retrievedEmail: retrieved.data.data.customer_email,
    listedIds: listed.data.data.map((s) => s.id),
    invoiceCount: invoices.data.data.length,
    firstPeriodIndexStart: invoices.data.data[0]?.period_start ?? null,
    canceledStatus: canceled.data.data.status,
    canceledBy: canceled.data.data.canceled_by,
    refusedStatus: refused.response.status,
    refusedCode: refused.error?.error.code,
    missingCode: missing.error?.error.code,
    badFilterStatus: badFilter.response.status,
  };
}
