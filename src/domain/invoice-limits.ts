// Caps on what one invoice may hold, in one place: the request schemas enforce them, the README
// documents them. A cap on line items bounds the PDF (100 lines of 500 characters render in
// about 35 pages) and so the time and memory one invoice can cost a worker.
export const MAX_LINE_ITEMS = 100;
export const MAX_LINE_DESCRIPTION = 500;
export const MAX_MEMO = 5000;
export const MAX_FOOTER = 5000;
export const MAX_CUSTOMER_NAME = 200;
export const MAX_TAX_ID = 100;

/** Metadata of any object: at most this many keys, each 1 to MAX_METADATA_KEY characters, values up to MAX_METADATA_VALUE. */
export const MAX_METADATA_KEYS = 50;
export const MAX_METADATA_KEY = 40;
export const MAX_METADATA_VALUE = 500;

/** Instants the API accepts: from the Unix epoch to the last instant RFC 3339 can write. */
export const EARLIEST_INSTANT_MS = Date.UTC(1970, 0, 1);
export const LATEST_INSTANT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** An RFC 3339 date-time (already matched by the schema) whose instant lies in 1970-9999 UTC. */
export function isInstantInRange(value: string): boolean {
  const ms = Date.parse(value);
  return Number.isFinite(ms) && ms >= EARLIEST_INSTANT_MS && ms <= LATEST_INSTANT_MS;
}
