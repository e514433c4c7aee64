// Receipts: an invoice that turns paid, by any path (the test helper, the payment page, a direct
// SQL UPDATE), gets exactly one "payment received" email with a receipt PDF, through the
// delivery machinery (database trigger -> delivery + outbox in the same transaction -> worker).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolClient, Queryable } from '../../src/db/pool.js';
import { oweReceipts } from '../../src/db/outbox.js';
import { newId } from '../../src/domain/ids.js';
import { JOBS } from '../../src/queue/catalogue.js';
import type { WorkerRuntime } from '../../src/runtime/worker-runtime.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';
import { extractPdfText } from '../helpers/pdf-text.js';
import { recipientsOf, startSmtpSink, type SmtpSink } from '../helpers/smtp-sink.js';
import { startWorker, waitQueueDrained, waitUntil } from '../helpers/worker.js';

let fx: ApiFixture;
let sink: SmtpSink;
let worker: WorkerRuntime;
const api = apiClient(() => fx.api.app);
const key = () => fx.merchant.keys.sandbox;

beforeAll(async () => {
  sink = await startSmtpSink();
  fx = await startApiFixture({ SMTP_URL: sink.url });
  // The reconciler every second: it owes the receipts of stranded fan-out rows (the last describe).
  worker = await startWorker(fx.env.config({ SMTP_URL: sink.url, OUTBOX_RELAY_INTERVAL_MS: '100', RECONCILE_EVERY: 'PT1S' }));
});
afterAll(async () => {
  await worker?.close();
  await fx?.close();
  await sink?.close();
});

const to = recipientsOf;
const receiptsTo = (email: string) => sink.messages.filter((m) => to(m).includes(email) && /^(Payment received|Zahlung erhalten)/.test(m.subject ?? ''));

async function sentInvoice(email: string, body: Record<string, unknown> = {}) {
  const created = await api.post('/v1/invoices', key(), { customer_email: email, amount: '250.75', ...body });
  expect(created.status, created.raw).toBe(200);
  const sent = await api.post(`/v1/invoices/${created.body.data.id}/send`, key());
  expect(sent.status, sent.raw).toBe(200);
  // The invoice email first, so the receipt is told apart from it.
  await waitUntil(async () => sink.messages.some((m) => to(m).includes(email)), 20_000);
  return sent.body.data;
}

async function receiptRows(invoiceId: string) {
  const { rows } = await fx.api.pool.query<{ status: string; message_id: string }>(
    `select status, message_id from deliveries where invoice_id = $1 and kind = 'receipt'`,
    [invoiceId],
  );
  return rows;
}

/** Outbox rows of the invoice the relay has still to hand over. */
async function pendingOutboxRows(invoiceId: string): Promise<number> {
  const { rows } = await fx.api.pool.query<{ n: number }>(
    `select count(*)::int as n from outbox where payload->>'invoiceId' = $1 and enqueued_at is null and failed_at is null`,
    [invoiceId],
  );
  return rows[0].n;
}

describe('receipts', () => {
  it('paid through the test helper: one "payment received" email with a receipt PDF', async () => {
    const email = 'helper@example.test';
    const inv = await sentInvoice(email);
    const paid = await api.post(`/v1/test_helpers/invoices/${inv.id}/pay`, key());
    expect(paid.status).toBe(200);
    await waitUntil(async () => receiptsTo(email).length === 1, 20_000);
    const [mail] = receiptsTo(email);
    expect(mail.subject).toBe(`Payment received: invoice ${inv.code} from Acme Widgets Ltd`);
    expect(mail.text).toContain('Amount paid: 250.75 USDC on base-sepolia');
    expect(mail.text).toContain('TEST MODE');
    // Recorded sent once SMTP took it (the sink may hold the message a moment before).
    await waitUntil(async () => (await receiptRows(inv.id))[0]?.status === 'sent', 20_000);
    const [row] = await receiptRows(inv.id);
    expect(mail.messageId).toBe(row.message_id);
    expect(mail.messageId).toMatch(/^<dlv_[0-9A-Za-z]{24}@example\.test>$/);
    expect(mail.attachments.map((a) => a.filename)).toEqual([`receipt-${inv.code}.pdf`]);
    const pdf = (await extractPdfText(mail.attachments[0].content)).join('\n').replace(/\s+/g, ' ');
    const paidDate = new Intl.DateTimeFormat('en-US', { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'Europe/Paris' })
      .formatToParts(new Date(paid.body.data.paid_at))
      .reduce<Record<string, string>>((a, p) => ({ ...a, [p.type]: p.value }), {});
    for (const expected of ['Receipt', inv.code, 'Paid 250.75 USDC on base-sepolia', `Paid: ${paidDate.day} ${paidDate.month} ${paidDate.year}`, 'Chain id: 84532', 'TEST MODE']) {
      expect(pdf).toContain(expected);
    }
    // Nothing else arrives later: once every outbox row of the invoice is handed over and the send
    // queue is drained, nothing is left that could email it, and a second send would have reached
    // RCPT (the invoice email and the receipt are the two). The timeline does not list the receipt.
    await waitUntil(async () => (await pendingOutboxRows(inv.id)) === 0, 20_000);
    await waitQueueDrained(fx.api.queues.send, 20_000);
    expect(sink.recipientsSeen.filter((a) => a === email)).toHaveLength(2);
    expect(receiptsTo(email)).toHaveLength(1);
    const timeline = await api.get(`/v1/invoices/${inv.id}/reminders`, key());
    expect(timeline.body.data.past).toEqual([]);
  });

  it('paid by a direct SQL UPDATE: the trigger queues the receipt in the same transaction; it arrives once', async () => {
    const email = 'sql@example.test';
    const inv = await sentInvoice(email, { customer_locale: 'de' });
    const client = await fx.api.pool.connect();
    try {
      await client.query('begin');
      await client.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
      // Inside the transaction: the delivery and the outbox row exist with the change...
      const inside = await client.query(`select count(*)::int as n from outbox where job_name = $1 and payload->>'invoiceId' = $2`, ['invoice.receipt', inv.id]);
      expect(inside.rows[0].n).toBe(1);
      await client.query('rollback');
    } finally {
      client.release();
    }
    // ...and vanish with it: a rolled-back payment owes no receipt.
    expect(await receiptRows(inv.id)).toEqual([]);

    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [inv.id]);
    // Touching the paid invoice again (same status, or another column) queues nothing more.
    await fx.api.pool.query(`update invoices set status = 'paid', updated_at = now() where id = $1`, [inv.id]);
    await waitUntil(async () => receiptsTo(email).length === 1, 20_000);
    expect(receiptsTo(email)[0].subject).toBe(`Zahlung erhalten: Rechnung ${inv.code} von Acme Widgets Ltd`);
    expect(await receiptRows(inv.id)).toHaveLength(1);
  });

  it('exactly once even when the job runs again (a duplicate add, a retry): the delivery row says sent', async () => {
    const email = 'twice@example.test';
    const inv = await sentInvoice(email);
    await api.post(`/v1/test_helpers/invoices/${inv.id}/pay`, key());
    await waitUntil(async () => (await receiptRows(inv.id))[0]?.status === 'sent', 20_000);
    const { rows } = await fx.api.pool.query<{ payload: Record<string, string> }>(`select payload from outbox where job_name = $1 and payload->>'invoiceId' = $2`, [
      'invoice.receipt',
      inv.id,
    ]);
    // The invoice email and the receipt have both reached RCPT by now (the receipt row says sent).
    const rcptBefore = sink.recipientsSeen.filter((a) => a === email).length;
    // The same job under another id, as a retried or re-relayed job would run.
    const job = await fx.api.queues.send.add('invoice.receipt', rows[0].payload, { ...JOBS['invoice.receipt'].options, jobId: `again-${inv.id}` });
    await waitUntil(async () => (await job.getState()) === 'completed', 20_000);
    expect(await job.getState()).toBe('completed');
    // A second send would have reached RCPT before its job completed; the parsed copy of the first
    // may still be on its way, so wait for it rather than read it at once.
    expect(sink.recipientsSeen.filter((a) => a === email)).toHaveLength(rcptBefore);
    await waitUntil(async () => receiptsTo(email).length >= 1, 20_000);
    expect(receiptsTo(email)).toHaveLength(1);
  });

  it('a voided invoice gets no receipt', async () => {
    const email = 'void@example.test';
    const inv = await sentInvoice(email);
    await fx.api.pool.query(`update invoices set status = 'void' where id = $1`, [inv.id]);
    expect(await receiptRows(inv.id)).toEqual([]);
  });
});

describe('partial payments', () => {
  const EXPLORER = 'https://sepolia.basescan.org';
  const partialsTo = (email: string) => sink.messages.filter((m) => to(m).includes(email) && (m.subject ?? '').startsWith('Partial payment received'));

  /** A confirmed payment no invoice claimed, on the invoice's chain and token (as the detector records one). */
  async function unmatchedPayment(invoiceId: string, amountAtomic: string, txHash: string): Promise<string> {
    const id = newId('pay');
    await fx.api.pool.query(
      `insert into payments (id, account_id, environment, chain_id, network, tx_hash, log_index, tx_position, block_number, block_hash,
         token_address, to_address, amount_atomic, fee_atomic, received_atomic, fee_received_atomic, kind, status, outcome, confirmed_at)
       select $1, i.account_id, i.environment, i.chain_id, i.network, $2, 0, 'transfer:0', 1, $3, i.token_address,
         '0x2222222222222222222222222222222222222222', $4, 0, $4, 0, 'transfer', 'confirmed', 'unmatched', now()
       from invoices i where i.id = $5`,
      [id, txHash, `0x${'00'.repeat(32)}`, amountAtomic, invoiceId],
    );
    return id;
  }

  async function partialRows(invoiceId: string) {
    const { rows } = await fx.api.pool.query<{ payment_id: string; status: string }>(
      `select payment_id, status from deliveries where invoice_id = $1 and kind = 'partial_payment'`,
      [invoiceId],
    );
    return rows;
  }

  it('each partial payment is acknowledged once (what arrived, what remains, the link); the one that pays in full gets the receipt, which lists both', async () => {
    const email = 'split@example.test';
    const inv = await sentInvoice(email);
    const firstTx = `0x${'a1'.repeat(32)}`;
    const secondTx = `0x${'b2'.repeat(32)}`;
    const first = await unmatchedPayment(inv.id, '100000000', firstTx);
    const second = await unmatchedPayment(inv.id, '150750000', secondTx);

    const applied = await api.post(`/v1/payments/${first}/apply`, key(), { invoice_id: inv.id });
    expect(applied.status, applied.raw).toBe(200);
    await waitUntil(async () => partialsTo(email).length === 1, 20_000);
    const ack = partialsTo(email)[0];
    expect(ack.subject).toBe(`Partial payment received: 100.00 USDC toward invoice ${inv.code} from Acme Widgets Ltd`);
    expect(ack.text).toContain('Received: 100.00 USDC');
    // base-sepolia has an explorer: the transaction is its link.
    expect(ack.text).toContain(`Transaction: ${EXPLORER}/tx/${firstTx}`);
    expect(ack.html).toContain(`<a href="${EXPLORER}/tx/${firstTx}"`);
    expect(ack.text).toContain('Remaining to pay: 150.75 USDC');
    expect(ack.text).toMatch(new RegExp(`Pay the rest: \\S+/${inv.reference}`));
    expect(ack.attachments).toHaveLength(0);
    // Recorded sent once SMTP took it: the sink can hold the message a moment before (a full run caught it pending).
    await waitUntil(async () => (await partialRows(inv.id)).every((r) => r.status === 'sent'), 20_000);
    // A writer touching the applied row again (the detector rewrites rows it scans) queues nothing more.
    await fx.api.pool.query(`update payments set status = 'confirmed', outcome = 'applied', updated_at = now() where id = $1`, [first]);
    expect(await partialRows(inv.id)).toEqual([{ payment_id: first, status: 'sent' }]);

    const rest = await api.post(`/v1/payments/${second}/apply`, key(), { invoice_id: inv.id });
    expect(rest.status, rest.raw).toBe(200);
    await waitUntil(async () => receiptsTo(email).length === 1, 20_000);
    const receipt = receiptsTo(email)[0];
    expect(receipt.text).toContain(`Transaction: ${EXPLORER}/tx/${firstTx} (100.00 USDC)`);
    expect(receipt.text).toContain(`Transaction: ${EXPLORER}/tx/${secondTx} (150.75 USDC)`);
    const pdf = (await extractPdfText(receipt.attachments[0].content)).join('').replace(/\s+/g, '');
    expect(pdf).toContain(`Transaction:${firstTx}(100.00USDC)`);
    expect(pdf).toContain(`Transaction:${secondTx}(150.75USDC)`);
    // The payment that paid in full is not acknowledged as partial: one acknowledgement in all.
    await waitQueueDrained(fx.api.queues.send);
    expect(await partialRows(inv.id)).toEqual([{ payment_id: first, status: 'sent' }]);
    expect(partialsTo(email)).toHaveLength(1);
  });

  it('a rolled-back application owes nothing: the delivery is written at the commit, with it', async () => {
    const email = 'rollback-partial@example.test';
    const inv = await sentInvoice(email);
    const id = await unmatchedPayment(inv.id, '1000000', `0x${'c3'.repeat(32)}`);
    const apply = async (end: 'commit' | 'rollback') => {
      const client = await fx.api.pool.connect();
      try {
        await client.query('begin');
        // The payment row first, the balance after, as the writers do: the trigger waits for the commit.
        await client.query(`update payments set invoice_id = $2, outcome = 'applied', counted_atomic = received_atomic where id = $1`, [id, inv.id]);
        await client.query(`update invoices set amount_paid_atomic = 1000000 where id = $1`, [inv.id]);
        await client.query(end);
      } finally {
        client.release();
      }
    };
    await apply('rollback');
    expect(await partialRows(inv.id)).toEqual([]);
    await apply('commit');
    const { rows } = await fx.api.pool.query<{ payload: Record<string, string> }>(
      `select payload from outbox where job_name = 'invoice.partial_payment' and payload->>'invoiceId' = $1`,
      [inv.id],
    );
    // What remained once the balance of the same transaction was written: 250.75 - 1.
    expect(rows.map((r) => [r.payload.paymentId, r.payload.remainingAtomic])).toEqual([[id, '249750000']]);
    await waitUntil(async () => partialsTo(email).length === 1, 20_000);
    expect(partialsTo(email)[0].text).toContain('Remaining to pay: 249.75 USDC');
  });
});


describe('receipts of many invoices paid by one statement (a range of the payment detector)', () => {
  /** Each tag's references start here, so no two copies share one. */
  const REFERENCE_OFFSETS = { h: 0, m: 1_000, e: 10_000, s: 20_000, f: 30_000, a: 40_000 } as const;
  /** `n` more open invoices of the same merchant and customer, written as the detector's tests write them (each tag its own references). */
  async function copiesOf(db: Queryable, invoiceId: string, n: number, tag: keyof typeof REFERENCE_OFFSETS): Promise<string[]> {
    const { rows } = await db.query<{ id: string }>(
      `insert into invoices (id, account_id, environment, customer_id, code, reference, status, amount, amount_atomic, fee_atomic, currency,
         network, chain_id, token_address, token_decimals, sent_at, settlement_address, reference_salt, payment_reference, payment_reference_topic, fee_bps)
       select i.id || '_' || $3 || g, i.account_id, i.environment, i.customer_id, i.code || '-' || $3 || g, i.reference || $3 || g, 'open', i.amount, i.amount_atomic,
         i.fee_atomic, i.currency, i.network, i.chain_id, i.token_address, i.token_decimals, i.sent_at, i.settlement_address, i.reference_salt,
         '0x' || lpad(to_hex($4::int + g), 16, '0'), '0x' || lpad(to_hex($4::int + g), 64, '0'), i.fee_bps
       from invoices i cross join generate_series(1, $2::int) g where i.id = $1
       returning id`,
      [invoiceId, n, tag, REFERENCE_OFFSETS[tag]],
    );
    return rows.map((r) => r.id);
  }

  async function owedInside(client: PoolClient, ids: string[]) {
    const fanOut = await client.query<{ payload: { batchId: string; invoiceIds: string[] } }>(
      `select payload from outbox where job_name = 'invoice.receipts' and payload->'invoiceIds' ?| $1::text[] order by id`,
      [ids],
    );
    const deliveries = await client.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and invoice_id = any($1)`, [ids]);
    const jobs = await client.query<{ n: number }>(`select count(*)::int as n from outbox where job_name = 'invoice.receipt' and payload->>'invoiceId' = any($1)`, [ids]);
    return { fanOut: fanOut.rows.map((r) => r.payload.invoiceIds), deliveries: deliveries.rows[0].n, jobs: jobs.rows[0].n };
  }

  it('up to 100 owe their receipts in the statement; more owe them by one fan-out row per 500 invoices, in the same transaction', async () => {
    const inv = await sentInvoice('many-sql@example.test');
    const client = await fx.api.pool.connect();
    try {
      await client.query('begin');
      const hundred = [inv.id, ...(await copiesOf(client, inv.id, 99, 'h'))];
      await client.query(`update invoices set status = 'paid', paid_at = now() where id = any($1)`, [hundred]);
      expect(await owedInside(client, hundred)).toEqual({ fanOut: [], deliveries: 100, jobs: 100 });

      const many = await copiesOf(client, inv.id, 1_201, 'm');
      await client.query(`update invoices set status = 'paid', paid_at = now() where id = any($1)`, [many]);
      const owed = await owedInside(client, many);
      // Three rows of 500, 500 and 201 invoices: each invoice in exactly one; nothing written per invoice yet.
      expect(owed.fanOut.map((ids) => ids.length)).toEqual([500, 500, 201]);
      expect(owed.fanOut.flat().sort()).toEqual([...many].sort());
      expect(owed).toMatchObject({ deliveries: 0, jobs: 0 });
      // The job's work, twice: each invoice owes one receipt, once.
      expect(await oweReceipts(client, owed.fanOut[0])).toBe(500);
      expect(await oweReceipts(client, owed.fanOut[0])).toBe(0);
      expect(await owedInside(client, owed.fanOut[0])).toMatchObject({ deliveries: 500, jobs: 500 });
      await client.query('rollback');
    } finally {
      client.release();
    }
    // Rolled back: nothing is owed.
    expect(await receiptRows(inv.id)).toEqual([]);
  });

  it('101 invoices paid by one UPDATE (one over the threshold): each gets exactly one receipt email, through the fan-out job', async () => {
    const email = 'many@example.test';
    const inv = await sentInvoice(email);
    const ids = [inv.id, ...(await copiesOf(fx.api.pool, inv.id, 100, 'e'))];
    await fx.api.pool.query(`update invoices set status = 'paid', paid_at = now() where id = any($1)`, [ids]);
    const fanOut = await fx.api.pool.query(`select 1 from outbox where job_name = 'invoice.receipts' and payload->'invoiceIds' ?| $1::text[]`, [ids]);
    expect(fanOut.rowCount).toBe(1);
    const sent = async () =>
      (await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and status = 'sent' and invoice_id = any($1)`, [ids])).rows[0].n;
    await waitUntil(async () => (await sent()) === 101, 60_000);
    await waitUntil(async () => receiptsTo(email).length >= 101, 20_000);
    await waitQueueDrained(fx.api.queues.send);
    expect(receiptsTo(email)).toHaveLength(101);
    const { rows } = await fx.api.pool.query<{ invoice_id: string; n: number }>(
      `select invoice_id, count(*)::int as n from deliveries where kind = 'receipt' and invoice_id = any($1) group by invoice_id having count(*) <> 1`,
      [ids],
    );
    expect(rows).toEqual([]);
    // Its job deleted the fan-out row with the work: nothing is left for the reconciler to owe again.
    const left = await fx.api.pool.query(`select 1 from outbox where job_name = 'invoice.receipts' and payload->'invoiceIds' ?| $1::text[]`, [ids]);
    expect(left.rowCount).toBe(0);
  });

  it('a fan-out row whose job never ran (lost with Redis, out of attempts, or set aside) is owed by the reconciler, once; a recent one is left to its job', async () => {
    const email = 'stranded@example.test';
    const inv = await sentInvoice(email);
    const stranded = [inv.id, ...(await copiesOf(fx.api.pool, inv.id, 100, 's'))];
    const fresh = await copiesOf(fx.api.pool, inv.id, 101, 'f');
    const setAside = await copiesOf(fx.api.pool, inv.id, 101, 'a');
    const client = await fx.api.pool.connect();
    try {
      // Paid, and each fan-out row put where a loss leaves it, in one transaction: the relay never
      // sees them pending. Handed over 11 minutes ago and never done; handed over a minute ago (its
      // job may still be queued behind other work); set aside by a worker that did not know the job.
      await client.query('begin');
      const fanOutOf = async (ids: string[], set: string) => {
        await client.query(`update invoices set status = 'paid', paid_at = now() where id = any($1)`, [ids]);
        const r = await client.query(`update outbox set ${set} where job_name = 'invoice.receipts' and payload->'invoiceIds' ?| $1::text[]`, [ids]);
        expect(r.rowCount).toBe(1);
      };
      await fanOutOf(stranded, `enqueued_at = now() - interval '11 minutes'`);
      await fanOutOf(fresh, `enqueued_at = now() - interval '1 minute'`);
      await fanOutOf(setAside, `failed_at = now(), failed_reason = 'unknown_job'`);
      await client.query('commit');
    } finally {
      client.release();
    }
    const owed = async (ids: string[]) =>
      (await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and invoice_id = any($1)`, [ids])).rows[0].n;
    const sent = async (ids: string[]) =>
      (await fx.api.pool.query<{ n: number }>(`select count(*)::int as n from deliveries where kind = 'receipt' and status = 'sent' and invoice_id = any($1)`, [ids])).rows[0].n;
    await waitUntil(async () => (await sent(stranded)) === 101 && (await sent(setAside)) === 101, 60_000);
    // The run that owed those saw the recent row in the same statement and left it to its job.
    expect(await owed(fresh)).toBe(0);
    const fanOutLeft = await fx.api.pool.query<{ payload: { invoiceIds: string[] } }>(
      `select payload from outbox where job_name = 'invoice.receipts' and payload->'invoiceIds' ?| $1::text[]`,
      [[...stranded, ...fresh, ...setAside]],
    );
    expect(fanOutLeft.rows.map((r) => [...r.payload.invoiceIds].sort())).toEqual([[...fresh].sort()]);
    await waitUntil(async () => receiptsTo(email).length >= 202, 20_000);
    await waitQueueDrained(fx.api.queues.send);
    // Each invoice one receipt delivery and one email.
    const twice = await fx.api.pool.query(
      `select invoice_id from deliveries where kind = 'receipt' and invoice_id = any($1) group by invoice_id having count(*) <> 1`,
      [[...stranded, ...setAside]],
    );
    expect(twice.rows).toEqual([]);
    expect(receiptsTo(email)).toHaveLength(202);
  });
});
