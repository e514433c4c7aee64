// The invoicing service (src/invoicing) below HTTP: what a job does to issue or send an invoice (a
// subscription's period invoice), called with a pool and nothing of Fastify, gives what
// POST /v1/invoices/{id}/send gives. The draft is made with src/db as a job would make it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertCustomer } from '../../src/db/customers.js';
import { insertInvoice, replaceLines, type Scope } from '../../src/db/invoices.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { newId, newInvoiceReference } from '../../src/domain/ids.js';
import { Money, toAtomic } from '../../src/domain/money.js';
import { derivePaymentReference } from '../../src/domain/payments.js';
import { BUILT_IN_CHAINS } from '../../src/domain/chains.js';
import { resolveToken } from '../../src/domain/tokens.js';
import { ApiError, DomainError } from '../../src/errors.js';
import { issueInvoice, sendInvoice } from '../../src/invoicing/issue.js';
import { provisionMerchant } from '../../src/runtime/provision.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';

const SETTLEMENT = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const MAIL_FROM = 'Billing <billing@example.test>';

let env: TestEnv;
let pool: Pool;
let scope: Scope;

beforeAll(async () => {
  env = await createTestEnv();
  pool = createPool(env.db.url, 4);
  const accountId = newId('acct');
  await provisionMerchant(pool, { id: accountId, name: 'Period Billing Ltd', email: 'billing@period.test', settlementAddress: SETTLEMENT });
  scope = { accountId, environment: 'sandbox' };
});
afterAll(async () => {
  await pool?.end();
  await env?.cleanup();
});

/** A draft of 12.5 USDC on the sandbox's default network (null amount: a draft without one). */
async function makeDraft(amount: string | null = '12.5'): Promise<string> {
  const token = resolveToken(BUILT_IN_CHAINS, 'sandbox');
  if (!token.ok) throw new Error(token.message);
  const customer = await upsertCustomer(pool, scope, 'subscriber@example.test', null, null);
  const atomic = amount === null ? null : toAtomic(new Money(amount), token.token.decimals);
  const draft = await insertInvoice(pool, {
    id: newId('inv'),
    scope,
    customerId: customer.id,
    reference: newInvoiceReference(),
    amount,
    amountAtomic: atomic,
    feeAtomic: atomic === null ? null : '0',
    currency: token.token.currency,
    network: token.token.network,
    chainId: token.token.chainId,
    tokenAddress: token.token.address,
    tokenDecimals: token.token.decimals,
    remindersEnabled: false,
    metadata: {},
    dueAt: null,
    memo: null,
    footer: null,
    taxId: null,
    customerLocale: 'en',
    feeBps: 0,
  });
  if (amount !== null) await replaceLines(pool, draft.id, [{ description: 'Period', quantity: 1, unitAmount: amount }]);
  return draft.id;
}

async function stored(invoiceId: string) {
  const { rows } = await pool.query<{ status: string; code: string | null; settlement_address: string | null; payment_reference: string | null; reference_salt: string | null }>(
    'select status, code, settlement_address, payment_reference, reference_salt from invoices where id = $1',
    [invoiceId],
  );
  return rows[0];
}

async function deliveriesOf(invoiceId: string) {
  const { rows } = await pool.query<{ id: string; kind: string; status: string; message_id: string | null }>(
    'select id, kind, status, message_id from deliveries where invoice_id = $1',
    [invoiceId],
  );
  return rows;
}

async function outboxOf(invoiceId: string) {
  const { rows } = await pool.query<{ job_name: string; job_id: string; payload: { invoiceId: string; deliveryId: string } }>(
    "select job_name, job_id, payload from outbox where payload->>'invoiceId' = $1",
    [invoiceId],
  );
  return rows;
}

async function refusal(call: Promise<unknown>): Promise<DomainError> {
  const err = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'the call was refused').toBeInstanceOf(DomainError);
  // The service knows no HTTP: the routes map its refusal to the API's error.
  expect(err).not.toBeInstanceOf(ApiError);
  return err as DomainError;
}

describe('the invoicing service, called as a job calls it (a pool, no Fastify)', () => {
  it('issueInvoice opens a draft with its code, settlement address and payment reference, and owes no email', async () => {
    const id = await makeDraft();
    const row = await issueInvoice(pool, scope, id);
    expect(row).toMatchObject({ id, status: 'open', settlement_address: SETTLEMENT });
    expect(row.code).toMatch(/^TEST-INV-\d{6}$/);
    const db = await stored(id);
    expect(db).toMatchObject({ status: 'open', code: row.code, settlement_address: SETTLEMENT, payment_reference: row.payment_reference });
    // The reference the detector matches proxy payments by, derived from the salt fixed now.
    expect(db.payment_reference).toBe(derivePaymentReference(id, db.reference_salt!, SETTLEMENT));
    expect(await deliveriesOf(id)).toEqual([]);
    expect(await outboxOf(id)).toEqual([]);
  });

  it('sendInvoice opens it and, in the same commit, owes the invoice email: its delivery and the invoice.send outbox row', async () => {
    const id = await makeDraft();
    const { row, job } = await sendInvoice(pool, scope, id, MAIL_FROM);
    expect(row).toMatchObject({ id, status: 'open', settlement_address: SETTLEMENT });
    expect(row.payment_reference).toMatch(/^0x[0-9a-f]{16}$/);
    const [delivery, ...more] = await deliveriesOf(id);
    expect(more).toEqual([]);
    expect(delivery).toMatchObject({ id: job.payload.deliveryId, kind: 'invoice', status: 'pending' });
    expect(delivery.message_id).toContain('@example.test>');
    expect(await outboxOf(id)).toEqual([{ job_name: 'invoice.send', job_id: job.job_id, payload: { invoiceId: id, deliveryId: delivery.id } }]);
  });

  it('refuses with a DomainError of the catalogue (no HTTP), and a refusal writes nothing', async () => {
    const sent = await makeDraft();
    await sendInvoice(pool, scope, sent, MAIL_FROM);
    expect((await refusal(sendInvoice(pool, scope, sent, MAIL_FROM))).code).toBe('invoice_already_sent');
    expect((await refusal(issueInvoice(pool, scope, sent))).code).toBe('invoice_already_sent');
    expect(await deliveriesOf(sent)).toHaveLength(1);
    expect(await outboxOf(sent)).toHaveLength(1);

    const noAmount = await makeDraft(null);
    expect((await refusal(sendInvoice(pool, scope, noAmount, MAIL_FROM))).code).toBe('invoice_amount_missing');
    expect(await stored(noAmount)).toMatchObject({ status: 'draft', code: null, payment_reference: null });
    expect(await deliveriesOf(noAmount)).toEqual([]);

    const other: Scope = { accountId: scope.accountId, environment: 'live' };
    const missing = await refusal(issueInvoice(pool, other, sent));
    expect(missing).toMatchObject({ code: 'resource_missing', param: 'id' });
  });
});
