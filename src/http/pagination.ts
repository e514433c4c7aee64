// Cursor pagination of list routes: `limit` (1-100, default 10) and `starting_after` (the last
// id of the previous page); the response is `{data, has_more}`.
import { ApiError } from '../errors.js';

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 100;

export function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  const n = /^[0-9]{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_LIMIT)) throw new ApiError('validation_failed', `limit must be an integer from 1 to ${MAX_LIMIT}.`, 'limit');
  return n;
}

export function unknownCursor(id: string): ApiError {
  return new ApiError('validation_failed', `starting_after ${JSON.stringify(id.slice(0, 64))} is not an object of this list.`, 'starting_after');
}
