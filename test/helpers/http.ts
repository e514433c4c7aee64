// HTTP helpers shared by the API integration tests (test/integration/api-*.test.ts): requests
// through Fastify's inject, the error-envelope assertion, and the per-file fixture (the API over
// a fresh database, its merchant and, by default, a second merchant "Other Co").
import type { AppDeps } from '../../src/http/types.js';
import { afterAll, beforeAll, expect } from 'vitest';
import { newId } from '../../src/domain/ids.js';
import type { Api } from '../../src/http/types.js';
import { provisionMerchant, type MerchantKeys } from '../../src/runtime/provision.js';
import { startApiFixture, type ApiFixture } from './context.js';

/**
 * A JSON object as the tests read it: deep access (`body.data.prices[0].id`) without a cast at
 * every step. The one `any` of the API tests; everything else is typed.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- deliberate, see above
export type JsonBody = Record<string, any>;

/** The error of the envelope `{ error: { type, code, message } }`. */
export interface ApiError {
  type: string;
  code: string;
  message: string;
}

/**
 * A parsed response body: `{ data }` on success, `{ error }` on failure. Both are declared so
 * either can be read without narrowing; the one the status does not promise is undefined.
 */
export interface ApiBody {
  data: JsonBody;
  error: ApiError;
  /** Lists: whether more items follow in the direction paged. */
  has_more: boolean;
}

export interface ApiResponse {
  status: number;
  /** The parsed JSON; null when the response had no body (or, with `lenientJson`, no JSON one). */
  body: ApiBody;
  /** The body as received. */
  raw: string;
}

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT' | 'OPTIONS';

/** A key (sent as `Api-Key`), null for no key at all, or the exact headers to send. */
export type Auth = string | null | Record<string, string>;

export type InjectTarget = Pick<Api, 'inject'>;

export interface RequestOptions {
  headers?: Record<string, string>;
  /** Sent as JSON. Takes precedence over `payload`. */
  body?: unknown;
  /** Sent as is (set the content type in `headers`). */
  payload?: string | Buffer;
  /** A body that is not JSON parses to null instead of failing the test. */
  lenientJson?: boolean;
}

export function authHeaders(auth: Auth): Record<string, string> {
  if (auth === null) return {};
  return typeof auth === 'string' ? { 'api-key': auth } : auth;
}

/** One request through `app.inject`, with the body parsed. */
export async function request(app: InjectTarget, method: HttpMethod, url: string, opts: RequestOptions = {}): Promise<ApiResponse> {
  const res = await app.inject({
    method,
    url,
    headers: opts.headers ?? {},
    ...(opts.body !== undefined ? { payload: opts.body as object } : opts.payload !== undefined ? { payload: opts.payload } : {}),
  });
  return { status: res.statusCode, body: parseBody(res.body, opts.lenientJson ?? false), raw: res.body };
}

/** What `body` is for an empty (or, when lenient, non-JSON) response: null, typed as a body. */
const NO_BODY = null as unknown as ApiBody;

function parseBody(raw: string, lenient: boolean): ApiBody {
  if (!raw) return NO_BODY;
  if (!lenient) return JSON.parse(raw) as ApiBody;
  try {
    return JSON.parse(raw) as ApiBody;
  } catch {
    return NO_BODY;
  }
}

export interface ApiClient {
  call(method: HttpMethod, url: string, auth: Auth, body?: unknown): Promise<ApiResponse>;
  get(url: string, auth: Auth): Promise<ApiResponse>;
  post(url: string, auth: Auth, body?: unknown): Promise<ApiResponse>;
  patch(url: string, auth: Auth, body?: unknown): Promise<ApiResponse>;
  del(url: string, auth: Auth): Promise<ApiResponse>;
}

/**
 * Requests to one app. Pass the app, or a function that returns it when it only exists once the
 * fixture has started (`apiClient(() => fx.api.app)`).
 */
export function apiClient(app: InjectTarget | (() => InjectTarget)): ApiClient {
  const target = () => ('inject' in app ? app : app());
  const call = (method: HttpMethod, url: string, auth: Auth, body?: unknown) => request(target(), method, url, { headers: authHeaders(auth), body });
  return {
    call,
    get: (url, auth) => call('GET', url, auth),
    post: (url, auth, body) => call('POST', url, auth, body),
    patch: (url, auth, body) => call('PATCH', url, auth, body),
    del: (url, auth) => call('DELETE', url, auth),
  };
}

export interface ErrorChecks {
  /** Also check that the message is a string (before its length). */
  messageIsString?: boolean;
  /** Also check that the body has no `data`. */
  noData?: boolean;
}

/** The error envelope with this status, type and code, and a non-empty message. */
export function expectError(res: ApiResponse, status: number, type: string, code: string, checks: ErrorChecks = {}): void {
  expect({ status: res.status, type: res.body?.error?.type, code: res.body?.error?.code }).toEqual({ status, type, code });
  if (checks.messageIsString) expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.message.length).toBeGreaterThan(0);
  if (checks.noData) expect(res.body.data).toBeUndefined();
}

export interface ApiFixtureOptions {
  /** Config overrides for the API (see startApiFixture). */
  overrides?: Record<string, string>;
  /** The second merchant "Other Co" (provisioned by default), or false for none. */
  otherMerchant?: { platformFeeBps?: number } | false;
  /** Dependencies handed to the API (see startApiFixture). */
  deps?: Partial<AppDeps>;
}

export interface ApiTestContext extends ApiClient {
  /** The fixture; filled in by beforeAll. */
  fx: ApiFixture;
  /** The fixture merchant's keys; filled in by beforeAll. */
  keys: MerchantKeys;
}

/**
 * Registers the beforeAll/afterAll of an API test file: the API over a fresh database, its
 * merchant, and (unless `otherMerchant: false`) a second merchant "Other Co". The returned
 * objects exist at once and are filled in by beforeAll, so module-level helpers can use them;
 * `call` and the other request methods go to `fx.api.app`.
 */
export function useApiFixture(options: ApiFixtureOptions & { otherMerchant: false }): ApiTestContext;
export function useApiFixture(options?: ApiFixtureOptions): ApiTestContext & { other: MerchantKeys };
export function useApiFixture(options: ApiFixtureOptions = {}): ApiTestContext & { other: MerchantKeys } {
  const fx = {} as ApiFixture;
  const keys = {} as MerchantKeys;
  const other = {} as MerchantKeys;
  let started: ApiFixture | undefined;
  beforeAll(async () => {
    started = await startApiFixture(options.overrides, options.deps);
    Object.assign(fx, started);
    Object.assign(keys, started.merchant.keys);
    if (options.otherMerchant !== false) {
      const provisioned = await provisionMerchant(started.api.pool, { id: newId('acct'), name: 'Other Co', email: null, ...options.otherMerchant });
      Object.assign(other, provisioned.keys);
    }
  });
  afterAll(async () => {
    await started?.close();
  });
  return { fx, keys, other, ...apiClient(() => fx.api.app) };
}
