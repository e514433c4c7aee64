// A domain verdict as the invoicing service's refusal: the service throws DomainError, never the
// API's error (which the routes map it to), so a job can call it as a route does.
import type { Verdict } from '../domain/invoice-rules.js';
import { DomainError } from '../errors.js';

/** The verdict's value, or its refusal thrown as a DomainError. */
export function accept<T>(v: Verdict<T>): T {
  if (!v.ok) throw new DomainError(v.code, v.message);
  return v.value;
}
