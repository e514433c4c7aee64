// The rules that live both in TypeScript (src/domain) and in SQL agree, checked against a real
// database for every case: the invoice statuses (TS list vs SQL enum), every transition (each
// event from each status: the conditional update in src/db vs nextStatus), "reminders run" (the
// SQL function vs remindersShouldRun, for every status and flag, and the stop trigger), and the
// delivery kinds (TS list vs the check constraint), and the ids (SQL new_id vs newId).
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteDraft, markSent, markVoid, setRemindersEnabled, updateDraft, type InvoiceRow } from '../../src/db/invoices.js';
import { settleSimulated } from '../../src/invoicing/sandbox-payments.js';
import { lockIfRemindersRun, markOverdue } from '../../src/db/reminders.js';
import { DELIVERY_KINDS } from '../../src/domain/delivery-kinds.js';
import { newId } from '../../src/domain/ids.js';
import { dustFloorAtomic } from '../../src/domain/payments.js';
import { canDelete, INVOICE_STATUSES, nextStatus, remindersShouldRun, type InvoiceEvent, type InvoiceStatus } from '../../src/domain/invoice-rules.js';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { apiClient } from '../helpers/http.js';

let fx: ApiFixture;
let invoiceId: string;

beforeAll(async () => {
  fx = await startApiFixture();
  const res = await apiClient(() => fx.api.app).call('POST', '/v1/invoices', fx.merchant.keys.sandbox, {
    customer_email: 'parity@example.test',
    amount: '10',
    due_at: new Date(Date.now() + 86_400_000).toISOString(),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  invoiceId = res.body.data.id;
});
afterAll(async () => {
  await fx?.close();
});

/**
 * Runs fn on the invoice put in `status` (with reminders on and a due date unless told), inside a
 * transaction that is rolled back: every case starts from the same row. Returns fn's result and
 * the status the row has afterwards (null: the row is gone).
 */
async function inStatus<T>(
  status: InvoiceStatus,
  fn: (tx: pg.PoolClient) => Promise<T>,
  row: { remindersEnabled?: boolean; dueAt?: Date | null } = {},
): Promise<{ result: T; after: InvoiceStatus | null }> {
  const tx = await fx.api.pool.connect();
  try {
    await tx.query('begin');
    await tx.query('update invoices set status = $2, reminders_enabled = $3, due_at = $4 where id = $1', [
      invoiceId,
      status,
      row.remindersEnabled ?? true,
      row.dueAt === undefined ? new Date(Date.now() + 86_400_000) : row.dueAt,
    ]);
    const result = await fn(tx);
    const { rows } = await tx.query<{ status: InvoiceStatus }>('select status from invoices where id = $1', [invoiceId]);
    return { result, after: rows[0]?.status ?? null };
  } finally {
    await tx.query('rollback');
    tx.release();
  }
}

const scope = () => ({ accountId: fx.merchant.accountId, environment: 'sandbox' as const });

/** Each event's conditional update in src/db: true when it applied. */
const SQL_TRANSITIONS: Partial<Record<InvoiceEvent, (tx: pg.PoolClient) => Promise<boolean>>> = {
  send: async (tx) => (await markSent(tx, invoiceId, `PARITY-${newId('inv')}`)) !== null,
  pay: (tx) => settleSimulated(tx, scope(), invoiceId),
  void: async (tx) => (await markVoid(tx, invoiceId)) !== null,
  mark_overdue: (tx) => markOverdue(tx, invoiceId),
  edit: async (tx) => ((await updateDraft(tx, invoiceId, { memo: 'parity' })) as InvoiceRow | undefined) !== undefined,
};

describe('invoice statuses', () => {
  it('the SQL enum holds exactly the domain list, in its order', async () => {
    const { rows } = await fx.api.pool.query<{ s: string }>('select unnest(enum_range(null::invoice_status))::text as s');
    expect(rows.map((r) => r.s)).toEqual([...INVOICE_STATUSES]);
  });
});

describe('transitions: the SQL guard and the domain table agree for every event from every status', () => {
  for (const [event, apply] of Object.entries(SQL_TRANSITIONS) as [InvoiceEvent, (tx: pg.PoolClient) => Promise<boolean>][]) {
    for (const from of INVOICE_STATUSES) {
      const verdict = nextStatus(from, event);
      it(`${event} from ${from}: ${verdict.ok ? `-> ${verdict.value}` : 'refused'}`, async () => {
        const { result, after } = await inStatus(from, apply);
        expect(result).toBe(verdict.ok);
        expect(after).toBe(verdict.ok ? verdict.value : from);
      });
    }
  }

  for (const from of INVOICE_STATUSES) {
    const allowed = canDelete(from).ok;
    it(`delete from ${from}: ${allowed ? 'deleted' : 'refused'}`, async () => {
      const { result, after } = await inStatus(from, (tx) => deleteDraft(tx, invoiceId));
      expect(result).toBe(allowed);
      expect(after).toBe(allowed ? null : from);
    });
  }
});

describe('"reminders run": the SQL function, the lock query and the stop trigger agree with remindersShouldRun', () => {
  const cases = INVOICE_STATUSES.flatMap((status) =>
    [true, false].flatMap((remindersEnabled) => [new Date('2030-01-01T00:00:00Z'), null].map((dueAt) => ({ status, remindersEnabled, dueAt }))),
  );

  it('invoice_reminders_run(status, enabled, due_at) for every status and flag', async () => {
    const { rows } = await fx.api.pool.query<{ status: InvoiceStatus; enabled: boolean; due_at: Date | null; runs: boolean }>(
      `select c.status, c.enabled, c.due_at, invoice_reminders_run(c.status::invoice_status, c.enabled, c.due_at) as runs
       from unnest($1::text[], $2::boolean[], $3::timestamptz[]) as c(status, enabled, due_at)`,
      [cases.map((c) => c.status), cases.map((c) => c.remindersEnabled), cases.map((c) => c.dueAt)],
    );
    expect(rows).toHaveLength(cases.length);
    for (const r of rows) {
      expect(r.runs, JSON.stringify(r)).toBe(remindersShouldRun({ status: r.status, remindersEnabled: r.enabled, dueAt: r.due_at }));
    }
  });

  it('lockIfRemindersRun reads the row with the same rule', async () => {
    for (const c of cases) {
      // Reminders never turned off and on again: no slot passed while they were off.
      const { result } = await inStatus(c.status, (tx) => lockIfRemindersRun(tx, invoiceId, new Date()), c);
      expect(result, JSON.stringify(c)).toBe(remindersShouldRun(c));
    }
  });

  it('a slot that passed while reminders were off is not run once they are on again; one after it is', async () => {
    const { result } = await inStatus('open', async (tx) => {
      const resumedAt = async () => (await tx.query<{ t: Date }>('select reminders_resumed_at as t from invoices where id = $1', [invoiceId])).rows[0].t;
      const missed = new Date(Date.now() - 1_000);
      await setRemindersEnabled(tx, invoiceId, false);
      const whileOff = await lockIfRemindersRun(tx, invoiceId, new Date(Date.now() + 60_000));
      await setRemindersEnabled(tx, invoiceId, true);
      const on = await resumedAt();
      // Turning on what is on already leaves the instant.
      await setRemindersEnabled(tx, invoiceId, true);
      return {
        whileOff,
        missed: await lockIfRemindersRun(tx, invoiceId, missed),
        next: await lockIfRemindersRun(tx, invoiceId, new Date(on.getTime() + 1)),
        onAgain: (await resumedAt()).getTime() === on.getTime(),
      };
    });
    expect(result).toEqual({ whileOff: false, missed: false, next: true, onAgain: true });
  });

  it('the stop trigger notifies exactly when the rule turns from true to false', async () => {
    const listener = await fx.api.pool.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => {
      if (n.channel === 'invoice_reminders_stop' && n.payload) heard.push(n.payload);
    });
    await listener.query('listen invoice_reminders_stop');
    try {
      const states = INVOICE_STATUSES.flatMap((status) => [true, false].map((remindersEnabled) => ({ status, remindersEnabled })));
      const due = new Date('2030-01-01T00:00:00Z');
      let expected = 0;
      for (const from of states) {
        for (const to of states) {
          await fx.api.pool.query('update invoices set status = $2, reminders_enabled = $3, due_at = $4 where id = $1', [invoiceId, from.status, from.remindersEnabled, due]);
          await listener.query('select 1');
          heard.length = 0;
          await fx.api.pool.query('update invoices set status = $2, reminders_enabled = $3 where id = $1', [invoiceId, to.status, to.remindersEnabled]);
          const stops = remindersShouldRun({ ...from, dueAt: due }) && !remindersShouldRun({ ...to, dueAt: due });
          // A NOTIFY sent by a committed transaction reaches a listening session before the
          // reply to its next query: one round trip on the listener flushes it.
          await listener.query('select 1');
          expect(heard, `${JSON.stringify(from)} -> ${JSON.stringify(to)}`).toEqual(stops ? [invoiceId] : []);
          if (stops) expected++;
        }
      }
      expect(expected).toBeGreaterThan(0);
    } finally {
      await listener.query('unlisten *').catch(() => undefined);
      listener.release();
    }
  });
});

describe('the dust floor: SQL dust_floor_atomic (the partial-payment email) and dustFloorAtomic (the detector) agree', () => {
  it('for every token precision from 0 to 36 decimals', async () => {
    const { rows } = await fx.api.pool.query<{ d: number; floor: string }>('select d, dust_floor_atomic(d)::text as floor from generate_series(0, 36) d order by d');
    expect(rows).toHaveLength(37);
    for (const r of rows) expect(BigInt(r.floor), `${r.d} decimals`).toBe(dustFloorAtomic(r.d));
  });
});

describe('delivery kinds', () => {
  it('the deliveries check constraint accepts exactly the domain list', async () => {
    const tx = await fx.api.pool.connect();
    try {
      for (const kind of [...DELIVERY_KINDS, 'reminder_someday']) {
        await tx.query('begin');
        const accepted = await tx
          .query('insert into deliveries (id, invoice_id, kind, slot_at, message_id) values ($1, $2, $3, now(), $4)', [newId('dlv'), invoiceId, kind, `<${newId('dlv')}@parity>`])
          .then(
            () => true,
            (err: { code?: string }) => {
              // 23505: the kind passed the check, another rule refused the row (one receipt per invoice).
              expect(['23514', '23505']).toContain(err.code);
              return err.code === '23505';
            },
          );
        await tx.query('rollback');
        expect(accepted, kind).toBe((DELIVERY_KINDS as readonly string[]).includes(kind));
      }
    } finally {
      tx.release();
    }
  });
});

describe('ids: SQL new_id(prefix) and TypeScript newId(prefix) make the same ids', () => {
  const SAMPLES = 4_000;
  const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

  /**
   * Pearson's chi-square of the characters after the prefix against the uniform distribution
   * over the 62 characters. 61 degrees of freedom: above 110 happens by chance about once in
   * 10^4 runs; a modulo without rejection (bytes 0-255 % 62 favour 8 characters by 25%) scores
   * in the hundreds at this sample size.
   */
  function chiSquare(ids: string[]): number {
    const counts = new Map<string, number>();
    let total = 0;
    for (const id of ids) {
      for (const c of id.slice(id.indexOf('_') + 1)) {
        counts.set(c, (counts.get(c) ?? 0) + 1);
        total++;
      }
    }
    const expected = total / ALPHABET.length;
    return [...ALPHABET].reduce((sum, c) => sum + ((counts.get(c) ?? 0) - expected) ** 2 / expected, 0);
  }

  it('same shape (prefix, "_", 24 base62 characters), same alphabet, both uniform', async () => {
    const { rows } = await fx.api.pool.query<{ id: string }>(`select new_id('evt') as id from generate_series(1, ${SAMPLES})`);
    const fromSql = rows.map((r) => r.id);
    const fromTs = Array.from({ length: SAMPLES }, () => newId('evt'));
    for (const ids of [fromSql, fromTs]) {
      for (const id of ids) expect(id).toMatch(/^evt_[0-9A-Za-z]{24}$/);
      expect(new Set(ids).size).toBe(SAMPLES);
      expect(new Set(ids.flatMap((id) => [...id.slice(4)])).size).toBe(ALPHABET.length);
      expect(chiSquare(ids)).toBeLessThan(110);
    }
  });

  it('no function of the schema makes an id any other way than new_id', async () => {
    const { rows } = await fx.api.pool.query<{ proname: string }>(
      `select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = current_schema() and p.proname <> 'new_id'
          and (p.prosrc like '%gen_random_uuid%' or p.prosrc like '%gen_random_bytes%' or p.prosrc ~ '''[a-z]+_'' \\|\\|')`,
    );
    expect(rows.map((r) => r.proname)).toEqual([]);
  });

  it('the ids the triggers make have that shape: an event, a receipt delivery', async () => {
    const { result } = await inStatus('open', async (tx) => {
      await tx.query(`update invoices set status = 'paid', paid_at = now() where id = $1`, [invoiceId]);
      const events = await tx.query<{ id: string }>('select id from events where object_id = $1', [invoiceId]);
      const receipts = await tx.query<{ id: string }>(`select id from deliveries where invoice_id = $1 and kind = 'receipt'`, [invoiceId]);
      return { events: events.rows.map((r) => r.id), receipts: receipts.rows.map((r) => r.id) };
    });
    expect(result.receipts).toHaveLength(1);
    expect(result.receipts[0]).toMatch(/^dlv_[0-9A-Za-z]{24}$/);
    expect(result.events.length).toBeGreaterThan(0);
    for (const id of result.events) expect(id).toMatch(/^evt_[0-9A-Za-z]{24}$/);
  });
});
