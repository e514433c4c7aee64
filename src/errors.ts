// The error catalogue: every stable `code` the API returns, with its type and HTTP status, in one
// place (the README's table is written from it). Routes throw ApiError; one Fastify error handler
// turns it into the spec's envelope.

export type ErrorType = 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'api_error';

const CATALOGUE = {
  // 400: the request is missing something or contradicts itself
  validation_failed: [400, 'invalid_request_error'],
  too_many_line_items: [400, 'invalid_request_error'],
  invalid_json: [400, 'invalid_request_error'],
  amount_invalid: [400, 'invalid_request_error'],
  amount_too_precise: [400, 'invalid_request_error'],
  amount_too_large: [400, 'invalid_request_error'],
  amount_not_positive: [400, 'invalid_request_error'],
  amount_mismatch: [400, 'invalid_request_error'],
  amount_out_of_range: [400, 'invalid_request_error'],
  network_not_allowed: [400, 'invalid_request_error'],
  unknown_network: [400, 'invalid_request_error'],
  unsupported_token: [400, 'invalid_request_error'],
  invalid_time_zone: [400, 'invalid_request_error'],
  unsupported_locale: [400, 'invalid_request_error'],
  invoice_not_editable: [400, 'invalid_request_error'],
  invoice_already_sent: [400, 'invalid_request_error'],
  invoice_amount_missing: [400, 'invalid_request_error'],
  invoice_not_payable: [400, 'invalid_request_error'],
  invoice_reminders_closed: [400, 'invalid_request_error'],
  invoice_not_voidable: [400, 'invalid_request_error'],
  invoice_not_deletable: [400, 'invalid_request_error'],
  invalid_cursor: [400, 'invalid_request_error'],
  idempotency_key_reused: [400, 'invalid_request_error'],
  price_not_found: [400, 'invalid_request_error'],
  price_inactive: [400, 'invalid_request_error'],
  price_not_recurring: [400, 'invalid_request_error'],
  product_inactive: [400, 'invalid_request_error'],
  cadence_interval_mismatch: [400, 'invalid_request_error'],
  payment_link_invalid: [400, 'invalid_request_error'],
  payment_link_inactive: [400, 'invalid_request_error'],
  payment_link_exhausted: [400, 'invalid_request_error'],
  webhook_url_invalid: [400, 'invalid_request_error'],
  webhook_url_not_public: [400, 'invalid_request_error'],
  // 404
  resource_missing: [404, 'invalid_request_error'],
  route_not_found: [404, 'invalid_request_error'],
  // 409, 413, 415, 429: still the caller's to fix
  payment_link_has_payments: [409, 'invalid_request_error'],
  product_not_deletable: [409, 'invalid_request_error'],
  idempotency_key_in_use: [409, 'invalid_request_error'],
  request_timeout: [408, 'invalid_request_error'],
  body_too_large: [413, 'invalid_request_error'],
  unsupported_media_type: [415, 'invalid_request_error'],
  rate_limited: [429, 'invalid_request_error'],
  // 401
  api_key_missing: [401, 'authentication_error'],
  api_key_invalid: [401, 'authentication_error'],
  api_key_revoked: [401, 'authentication_error'],
  // 403
  permission_denied: [403, 'permission_error'],
  live_mode_forbidden: [403, 'permission_error'],
  // 5xx: never with internals in the message
  internal_error: [500, 'api_error'],
} as const satisfies Record<string, readonly [number, ErrorType]>;

export type ErrorCode = keyof typeof CATALOGUE;
export type ErrorStatus = (typeof CATALOGUE)[ErrorCode][0];

/** Statuses only some routes answer (409: a conflict of one resource); those routes list them in their own schema. */
const ROUTE_SPECIFIC_STATUSES = [409] as const;
export type CommonErrorStatus = Exclude<ErrorStatus, (typeof ROUTE_SPECIFIC_STATUSES)[number]>;

/** Every status of the catalogue that any v1 route can answer, ascending. */
export function commonErrorStatuses(): CommonErrorStatus[] {
  const all = new Set(Object.values(CATALOGUE).map(([status]) => status));
  return [...all]
    .filter((s): s is CommonErrorStatus => !(ROUTE_SPECIFIC_STATUSES as readonly number[]).includes(s))
    .sort((a, b) => a - b);
}

export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    [this.status, this.type] = CATALOGUE[code];
  }
}

/** The spec's error envelope of an ApiError, as every HTTP port of the service answers it. */
export function errorEnvelope(err: ApiError): { error: { type: ErrorType; code: ErrorCode; message: string } } {
  return { error: { type: err.type, code: err.code, message: err.message } };
}

export function errorCatalogue(): { code: ErrorCode; status: number; type: ErrorType }[] {
  return (Object.keys(CATALOGUE) as ErrorCode[]).map((code) => ({ code, status: CATALOGUE[code][0], type: CATALOGUE[code][1] }));
}

export const notFound = (what: string, id: string): ApiError =>
  new ApiError('resource_missing', `No such ${what}: ${JSON.stringify(id.slice(0, 64))}.`, 'id');

// Job error kinds: the dispatcher maps a permanent failure to BullMQ's UnrecoverableError.
export class PermanentJobError extends Error {
  override readonly name = 'PermanentJobError';
}
