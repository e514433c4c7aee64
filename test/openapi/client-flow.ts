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
  };
}
