// The list endpoints' query: page size and cursors in, `{data, has_more}` out.
import type { FastifyRequest } from 'fastify';
import type { PageRequest, PageResult } from '../db/page.js';
import { ApiError } from '../errors.js';

export const DEFAULT_PAGE_SIZE = 10;

export interface PageQueryInput {
  limit?: number;
  starting_after?: string;
  ending_before?: string;
}

/**
 * Query strings are text and the API never coerces types in general ("12" is not 12 in a body);
 * a page size is the one number that can only arrive as text, so a run of digits becomes an
 * integer before validation, and anything else fails the schema's integer check.
 */
export async function coerceLimit(req: FastifyRequest): Promise<void> {
  const query = req.query as Record<string, unknown> | undefined;
  // A sign too: `limit=-1` is then "must be at least 1", not "must be an integer".
  if (query && typeof query.limit === 'string' && /^-?[0-9]{1,4}$/.test(query.limit)) query.limit = Number(query.limit);
}

export function pageRequest(q: PageQueryInput): PageRequest {
  if (q.starting_after !== undefined && q.ending_before !== undefined) {
    throw new ApiError('validation_failed', 'Give starting_after or ending_before, not both.', 'starting_after');
  }
  return { limit: q.limit ?? DEFAULT_PAGE_SIZE, startingAfter: q.starting_after, endingBefore: q.ending_before };
}

/** The page as the API answers it; a cursor that names nothing of this list is a 400. */
export function listBody<R, T>(result: PageResult<R>, what: string, present: (row: R) => T): { data: T[]; has_more: boolean } {
  if (!result.ok) {
    throw new ApiError(
      'invalid_cursor',
      `${result.missingCursor} names no ${what} of this account and environment (it may have been deleted).`,
      result.missingCursor,
    );
  }
  return { data: result.rows.map(present), has_more: result.hasMore };
}
