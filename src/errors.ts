// The error catalogue: every stable `code` the API returns, with its type and HTTP status, in one
// place (docs/api.md's table is generated from it, with ERROR_WHEN below). Routes throw ApiError; one Fastify error handler
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
  webhook_endpoint_limit_reached: [400, 'invalid_request_error'],
  api_key_limit_reached: [400, 'invalid_request_error'],
  // 404
  resource_missing: [404, 'invalid_request_error'],
  route_not_found: [404, 'invalid_request_error'],
  // 409, 413, 415, 429: still the caller's to fix
  payment_link_has_payments: [409, 'invalid_request_error'],
  payment_link_not_payable: [409, 'invalid_request_error'],
  product_not_deletable: [409, 'invalid_request_error'],
  webhook_endpoint_exists: [409, 'invalid_request_error'],
  idempotency_key_in_use: [409, 'invalid_request_error'],
  payment_already_applied: [409, 'invalid_request_error'],
  settlement_address_taken: [409, 'invalid_request_error'],
  settlement_address_reserved: [409, 'invalid_request_error'],
  payment_not_confirmed: [409, 'invalid_request_error'],
  payment_invoice_mismatch: [409, 'invalid_request_error'],
  subscription_not_active: [409, 'invalid_request_error'],
  subscription_not_available: [409, 'invalid_request_error'],
  request_timeout: [408, 'invalid_request_error'],
  body_too_large: [413, 'invalid_request_error'],
  unsupported_media_type: [415, 'invalid_request_error'],
  rate_limited: [429, 'invalid_request_error'],
  checkout_limit_reached: [429, 'invalid_request_error'],
  // 401
  api_key_missing: [401, 'authentication_error'],
  api_key_invalid: [401, 'authentication_error'],
  api_key_revoked: [401, 'authentication_error'],
  dashboard_auth_required: [401, 'authentication_error'],
  // 403
  permission_denied: [403, 'permission_error'],
  live_mode_forbidden: [403, 'permission_error'],
  // 5xx: never with internals in the message
  internal_error: [500, 'api_error'],
} as const satisfies Record<string, readonly [number, ErrorType]>;

export type ErrorCode = keyof typeof CATALOGUE;

/** When each code is answered: one line each, the "When" column of docs/api.md's generated table. */
export const ERROR_WHEN: Record<ErrorCode, string> = {
  validation_failed:
    'a body, path or query does not match the schema; the message names the field and the rule (`line_items[2].quantity must be an integer`, `unknown field "max_amount"`, `customer_email is required`). A route that takes no body (send, void, delete, cancel, the sandbox pay helper...) refuses one with a field (`{}` and no body are fine) rather than ignore it; a body nesting objects or arrays deeper than 32 levels is refused as it is parsed',
  too_many_line_items: 'more line items than the cap (100)',
  invalid_json: 'the body is not valid JSON (or not valid UTF-8)',
  amount_invalid: 'a decimal string is malformed',
  amount_too_precise: 'an amount has more decimals than the token',
  amount_too_large: 'an amount is >= 10^15',
  amount_not_positive: 'an amount (or a total) is zero',
  amount_mismatch: "`amount` disagrees with the line items (or a fixed-price link's price)",
  amount_out_of_range: "a payment outside a custom link's min/max",
  network_not_allowed: "the network is not in the key's environment (a sandbox key naming a production chain, or the reverse)",
  unknown_network: "the network is not in the key's environment's registry",
  unsupported_token: "the token is not in the key's environment's registry for that network",
  invalid_time_zone: '`customer_time_zone` is not an IANA zone',
  unsupported_locale: '`customer_locale` is not a language the documents are written in (`en`, `de`, `fr`, `es`, optionally with a region)',
  invoice_not_editable: 'PATCH on an invoice that is no longer a draft',
  invoice_already_sent: 'send on an invoice that is not a draft',
  invoice_amount_missing: 'send on a draft without amount',
  invoice_not_payable: 'pay (test helper) on an invoice that is not open/overdue',
  invoice_reminders_closed: 'reminders on a paid or void invoice',
  invoice_not_voidable: 'void on an invoice that is not open/overdue (a draft is deleted instead)',
  invoice_not_deletable: 'delete of an invoice that is not a draft',
  invalid_cursor: '`starting_after`/`ending_before` names no object of that list in this account and environment',
  idempotency_key_reused: 'an `Idempotency-Key` already used with a different request (method, path or body) in the last 24 h',
  price_not_found: 'the price named does not exist in this account and environment',
  price_inactive: 'the price named is inactive',
  price_not_recurring: 'a subscription names a one-time price',
  product_inactive: "the price named belongs to an inactive product",
  cadence_interval_mismatch: '`cadence` and `interval_seconds` disagree',
  payment_link_invalid: 'contradictory link fields (e.g. `redirect` without `redirect_url`)',
  payment_link_inactive: 'a payment on a closed link',
  payment_link_exhausted: 'a payment past `max_payments`',
  payment_link_not_payable: 'a wallet checkout of a link whose account has no settlement address in its environment, or whose chain has no fee proxy or fee address; a one-time checkout (`POST /pay/<link id>/checkout`) or a simulated payment (the test helper, the page\'s sandbox form) of a recurring price\'s link, which sells a subscription',
  webhook_url_invalid: 'a webhook URL that is not absolute http(s), carries credentials or a fragment, or is not https in live',
  webhook_url_not_public:
    'a webhook URL whose host resolves to a loopback, private, link-local or otherwise non-public address, or does not resolve; the message names the host, never what it resolves to',
  resource_missing: 'no such object in this account and environment',
  route_not_found: 'no such route',
  payment_link_has_payments: 'delete of a link that took payments',
  product_not_deletable: 'delete of a product one of whose prices is used by a subscription or a payment link',
  idempotency_key_in_use: 'a retry while the first request with that `Idempotency-Key` is still running',
  webhook_endpoint_limit_reached: 'the account already has 16 webhook endpoints in this environment (enabled or disabled): delete one first',
  api_key_limit_reached: 'the account already has 100 active API keys in this environment: revoke one first',
  webhook_endpoint_exists: 'an endpoint with that URL already exists in this account and environment (one endpoint per URL)',
  payment_already_applied: '`POST /v1/payments/{id}/apply` of a payment that already counts toward an invoice (matched by the detector or applied before)',
  settlement_address_taken: '`PATCH /v1/account` with an address that is another account\'s settlement address in that environment, or that open invoices of another account were sent to',
  settlement_address_reserved:
    "`PATCH /v1/account` with an address the deployment itself uses on one of its chains (any environment): a fee address, a fee proxy, a token contract or a subscription contract",
  payment_not_confirmed: '`POST /v1/payments/{id}/apply` of a payment that is still pending or was removed by a reorg',
  payment_invoice_mismatch: '`POST /v1/payments/{id}/apply` to an invoice of another chain or token, or one that is not open or overdue',
  subscription_not_active: '`POST /v1/subscriptions/{id}/cancel` of a subscription already `canceled` or `ended`',
  subscription_not_available:
    'a subscription checkout (`POST /pay/<link id>/subscribe`) on a chain without a SubscriptionManager (`subscription_manager` in CHAINS_FILE), without a relayer (operator) for it, or without a fee address while the account takes a fee',
  request_timeout: "the request's headers and body did not arrive within `HTTP_REQUEST_TIMEOUT_MS`; the connection is closed",
  body_too_large: 'body over `BODY_LIMIT_BYTES`',
  unsupported_media_type: 'a body that is not `application/json`',
  rate_limited: 'too many requests for this key, or too many failed authentications from this address',
  checkout_limit_reached:
    'a payment link checkout (`POST /pay/<link id>/checkout`) past `CHECKOUT_LIMIT_PER_LINK` unpaid checkouts of the link, or `CHECKOUT_LIMIT_PER_EMAIL` of the email in the account, made in the last hour',
  api_key_missing: 'no key',
  api_key_invalid: 'an unknown or malformed key',
  api_key_revoked: 'a revoked key',
  dashboard_auth_required: 'the queue dashboard (`/admin/queues`) without the admin credentials (`ADMIN_USER`/`ADMIN_PASSWORD`), or with wrong ones',
  permission_denied: 'a read-only key on a write',
  live_mode_forbidden: 'a live key on a sandbox test helper',
  internal_error: 'our fault (details in our logs, never in the message); retry later',
};
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

/**
 * A refusal by a rule of the service below HTTP (src/invoicing: issuing, sending, checkouts): a
 * catalogue code, what was refused, and the field at fault. It knows no status: the API maps it
 * to its ApiError (ApiError.from, in the error handlers), a job decides whether a retry could help.
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param?: string,
  ) {
    super(message);
  }
}

/** A DomainError with its HTTP face: the status and type the catalogue gives its code. */
export class ApiError extends DomainError {
  readonly status: number;
  readonly type: ErrorType;
  constructor(code: ErrorCode, message: string, param?: string) {
    super(code, message, param);
    [this.status, this.type] = CATALOGUE[code];
  }

  /** The API's answer to a refusal of the service: same code, message and field. */
  static from(err: DomainError): ApiError {
    return err instanceof ApiError ? err : new ApiError(err.code, err.message, err.param);
  }
}

/** The spec's error envelope of an ApiError, as every HTTP port of the service answers it. */
export function errorEnvelope(err: ApiError): { error: { type: ErrorType; code: ErrorCode; message: string } } {
  return { error: { type: err.type, code: err.code, message: err.message } };
}

export function errorCatalogue(): { code: ErrorCode; status: number; type: ErrorType }[] {
  return (Object.keys(CATALOGUE) as ErrorCode[]).map((code) => ({ code, status: CATALOGUE[code][0], type: CATALOGUE[code][1] }));
}

/** No such object in this account and environment, as a service below HTTP refuses it. */
export const missing = (what: string, id: string): DomainError =>
  new DomainError('resource_missing', `No such ${what}: ${JSON.stringify(id.slice(0, 64))}.`, 'id');

export const notFound = (what: string, id: string): ApiError => ApiError.from(missing(what, id));

// Job error kinds: the dispatcher maps a permanent failure to BullMQ's UnrecoverableError.
export class PermanentJobError extends Error {
  override readonly name = 'PermanentJobError';
}
