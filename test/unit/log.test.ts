// What an error's log line holds: its own fields and causes, never the objects it carries. A pg
// error from the queue backend's pool carried its whole client (about a hundred lines a warning).
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';

function logged(fields: Record<string, unknown>): Record<string, unknown> {
  const lines: string[] = [];
  createLogger('info', { write: (l: string) => void lines.push(l) }).warn(fields, 'queue connection error');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]) as Record<string, unknown>;
}

describe('an error in a log line', () => {
  it('keeps its message, stack, code and plain data; drops an instance it carries (a pg client)', () => {
    const client = new pg.Client({ connectionString: 'postgres://u:pw@127.0.0.1:1/db' });
    const err = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', client, detail: { table: 'job' } });
    const { err: out } = logged({ err }) as { err: Record<string, unknown> };
    expect(out).toMatchObject({ type: 'Error', message: 'terminating connection due to administrator command', code: '57P01', detail: { table: 'job' } });
    expect(String(out.stack)).toContain('terminating connection');
    expect(out).not.toHaveProperty('client');
    expect(JSON.stringify(out).length).toBeLessThan(2_000);
  });
});
