// What the API writes to its log about a request: never a query string (a key pasted into the
// URL, `?api_key=...`, must not end up in the logs), never a key header.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createApiRuntime, type ApiRuntime } from '../../src/runtime/api-runtime.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';

let env: TestEnv;
let api: ApiRuntime;
const lines: string[] = [];

beforeAll(async () => {
  env = await createTestEnv();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  api = await createApiRuntime(env.config({ LOG_LEVEL: 'info' }), createLogger('info', sink));
  await api.app.ready();
});
afterAll(async () => {
  await api?.close();
  await env?.cleanup();
});

it('logs the path of a request without its query string, and no key header', async () => {
  const secret = `sp_sandbox_${'q'.repeat(40)}`;
  const header = `sp_sandbox_${'h'.repeat(40)}`;
  for (const url of [`/v1/invoices/inv_x?api_key=${secret}`, `/nowhere?api_key=${secret}`, `/healthz?api_key=${secret}`]) {
    await api.app.inject({ method: 'GET', url, headers: { 'api-key': header } });
  }
  const requestLines = lines.filter((l) => l.includes('"req"'));
  expect(requestLines.length).toBeGreaterThanOrEqual(3);
  expect(requestLines.some((l) => l.includes('"url":"/v1/invoices/inv_x"'))).toBe(true);
  for (const l of lines) {
    expect(l).not.toContain(secret);
    expect(l).not.toContain('api_key=');
    expect(l).not.toContain(header);
  }
});
