// The error catalogue is the API's contract: every code keeps a type that matches its status,
// and every code is documented in docs/api.md (its table is generated; docs.test.ts checks it is current).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ApiError, DomainError, errorCatalogue } from '../../src/errors.js';

const API_DOC = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');

function typeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

describe('error catalogue', () => {
  it('gives every code the type its status implies', () => {
    for (const { code, status, type } of errorCatalogue()) expect([code, type]).toEqual([code, typeFor(status)]);
  });

  it('documents every code in docs/api.md', () => {
    const missing = errorCatalogue().filter(({ code }) => !API_DOC.includes(`\`${code}\``)).map((e) => e.code);
    expect(missing).toEqual([]);
  });

  it("docs/api.md's errors table gives every code its catalogue status", () => {
    const documented = new Map<string, number>();
    for (const row of API_DOC.matchAll(/^\| (`[a-z_]+`(?: \/ `[a-z_]+`)*) \| (\d{3}) \|/gm)) {
      for (const code of row[1].matchAll(/`([a-z_]+)`/g)) documented.set(code[1], Number(row[2]));
    }
    const wrong = errorCatalogue().filter(({ code, status }) => documented.get(code) !== status).map(({ code, status }) => [code, status, documented.get(code)]);
    expect(wrong).toEqual([]);
  });

  it('builds errors with the catalogue status and type', () => {
    const err = new ApiError('payment_link_has_payments', 'has payments');
    expect([err.status, err.type, err.code, err.message]).toEqual([409, 'invalid_request_error', 'payment_link_has_payments', 'has payments']);
  });
});

describe('DomainError (the invoicing service refuses with it, below HTTP)', () => {
  it('maps to the ApiError of its code: the catalogue status and type, the same message and field', () => {
    const refusal = new DomainError('amount_out_of_range', 'amount must be between 1 and 50 USDC.', 'amount');
    expect(refusal).not.toHaveProperty('status');
    const api = ApiError.from(refusal);
    expect(api).toBeInstanceOf(ApiError);
    expect(api).toMatchObject({ code: 'amount_out_of_range', message: refusal.message, param: 'amount', status: 400, type: 'invalid_request_error' });
    expect(ApiError.from(new DomainError('checkout_limit_reached', 'too many'))).toMatchObject({ status: 429 });
  });

  it('an ApiError is a DomainError, mapped to itself', () => {
    const api = new ApiError('resource_missing', 'No such invoice.');
    expect(api).toBeInstanceOf(DomainError);
    expect(ApiError.from(api)).toBe(api);
  });
});
