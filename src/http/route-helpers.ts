// Helpers every route module may use: the OpenAPI error responses, rule verdicts and the
// invoicing service's refusals as API errors, and the outbox fast path.
import { releaseOutboxHold } from '../db/outbox.js';
import { ApiError, commonErrorStatuses, DomainError, type CommonErrorStatus } from '../errors.js';
import type { Verdict } from '../domain/invoice-rules.js';
import type { OutboxJob } from '../queue/outbox.js';
import { ErrorEnvelope } from './schemas/index.js';
import type { AppDeps } from './types.js';

/** The error statuses any v1 route can answer, from the error catalogue, for the OpenAPI document. */
export const errorResponses = Object.fromEntries(commonErrorStatuses().map((status) => [status, ErrorEnvelope])) as Record<
  CommonErrorStatus,
  typeof ErrorEnvelope
>;

/** The value of a passing rule; a refusal becomes the API error it names. */
export function unwrap<T>(v: Verdict<T>): T {
  if (!v.ok) throw new ApiError(v.code, v.message);
  return v.value;
}

/**
 * The result of a call of a service below HTTP (src/invoicing), its refusal (a DomainError) as the
 * ApiError of the same code. For a route that handles errors itself; the app's error handler maps
 * a refusal that reaches it the same way.
 */
export async function refusalAsApiError<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    throw err instanceof DomainError ? ApiError.from(err) : err;
  }
}

/**
 * The fast path of the outbox: hands jobs committed by this request to BullMQ now. Redis trouble
 * must not fail a committed request; the worker's relay hands the job over later. Their rows were
 * held for this hand-over (enqueueInTransaction's `fastPath`, asked for whenever `deps.outbox` is
 * set): a failed one gives them back to the relay at once, without the request waiting for it.
 */
export async function publishQuietly(deps: Pick<AppDeps, 'outbox' | 'pool'>, jobs: readonly OutboxJob[], log: { warn: (o: object, m: string) => void }): Promise<void> {
  if (!deps.outbox || jobs.length === 0) return;
  try {
    await deps.outbox.publish(jobs);
  } catch (err) {
    const jobIds = jobs.map((j) => j.job_id);
    log.warn({ err, job_ids: jobIds }, 'enqueue after commit failed; the outbox relay will hand the job over');
    releaseOutboxHold(deps.pool, jobIds).catch((releaseErr: unknown) =>
      log.warn({ err: releaseErr, job_ids: jobIds }, 'could not hand the jobs back to the outbox relay at once; it takes them when their hold ends'),
    );
  }
}
