// Builds the HTTP API: plugins in a fixed order (parsers, error envelope, auth), then routes.
// Every dependency is passed in, so tests build the same app over their own pool and queues.
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Api, AppDeps } from './types.js';
import { ApiError, DomainError, errorEnvelope } from '../errors.js';
import { authenticate, presentKey, requireRouteAccess } from './auth.js';
import swagger from '@fastify/swagger';
import rateLimit from '@fastify/rate-limit';
import { healthPlugin } from './plugins/health.js';
import { idempotencyPlugin } from './plugins/idempotency.js';
import { operationIdFor } from './operation-ids.js';
import { IdempotencyKeyHeaders } from './schemas/index.js';
import { metricsPlugin } from './plugins/metrics.js';
import { requestKeywords } from './ajv-keywords.js';
import { createFailureLimiter } from './failure-limiter.js';
import { clip, validationError } from './validation-message.js';
import { credentialRoutes } from './routes/credentials.js';
import { invoiceRoutes } from './routes/invoices.js';
import { invoiceLifecycleRoutes } from './routes/invoice-lifecycle.js';
import { paymentLinkRoutes } from './routes/payment-links.js';
import { isPaymentPagePath, paymentPageRoutes, sendPageNotFound } from './routes/payment-page.js';
import { productRoutes } from './routes/products.js';
import { subscriptionRoutes } from './routes/subscriptions.js';
import { testHelperRoutes } from './routes/test-helpers.js';
import { eventRoutes } from './routes/events.js';
import { paymentRoutes } from './routes/payments.js';
import { webhookEndpointRoutes } from './routes/webhook-endpoints.js';

export type { Api as App, AppDeps } from './types.js';

type CallbackBodyParser = (req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => void;

function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  return reply.status(err.status).send(errorEnvelope(err));
}

/** Postgres text and jsonb hold neither U+0000 nor a lone UTF-16 surrogate (jsonb fails on one). */
function isStorableText(s: string): boolean {
  return !s.includes('\u0000') && s.isWellFormed();
}

/**
 * A string Postgres cannot store is refused as input instead of failing in SQL as a 500.
 * Iterative, so a deeply nested body cannot overflow the stack.
 */
function containsUnstorable(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (!isStorableText(value)) return true;
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (!isStorableText(k)) return true;
        stack.push(v);
      }
    }
  }
  return false;
}

/** JSON nested deeper than this is refused as it is parsed: no request of the API nests past a few levels. */
const MAX_JSON_DEPTH = 32;

/** Plain JSON accepts it (Fastify's parser also refuses valid JSON with prototype keys; both skip a BOM). */
function parsesAsJson(text: string): boolean {
  try {
    JSON.parse(text.replace(/^\uFEFF/, ''));
    return true;
  } catch {
    return false;
  }
}

/** Whether a parsed JSON value nests objects or arrays deeper than `max`. Iterative, like containsUnstorable. */
function nestedDeeperThan(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const v of Object.values(value)) stack.push([v, depth + 1]);
  }
  return false;
}

/** A body a route that takes none may still carry: nothing, or an empty object (clients send `{}` on POST /send). */
function isEmptyBody(body: unknown): boolean {
  return body === undefined || body === null || (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0);
}

/** Fastify's own errors, as the API's stable codes. */
function toApiError(err: FastifyError): ApiError | null {
  // An ApiError, or a refusal of the invoicing service: the status its code has in the catalogue.
  if (err instanceof DomainError) return ApiError.from(err);
  if (err.validation) return validationError(err.validation, err.validationContext);
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Request bodies must be JSON, sent with Content-Type: application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('body_too_large', 'The request body is too large.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_json', 'The Content-Length header does not match the body.');
    case 'FST_ERR_RATE_LIMIT':
      return new ApiError('rate_limited', 'Too many requests; slow down and retry after the Retry-After delay.');
  }
  // Postgres "data exception" (class 22): a value our validation let through but the database
  // cannot hold. The caller's to fix, not a 500.
  const pgCode = (err as { code?: unknown }).code;
  if (typeof pgCode === 'string' && /^22[0-9A-Z]{3}$/.test(pgCode)) {
    return new ApiError('validation_failed', 'A value in the request is out of the range the service can store.');
  }
  if (err.statusCode === 429) return new ApiError('rate_limited', 'Too many requests; slow down and retry after the Retry-After delay.');
  if (err.statusCode === 400 && err instanceof SyntaxError) return new ApiError('invalid_json', 'The request body is not valid JSON.');
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return new ApiError('validation_failed', 'The request could not be understood.');
  }
  return null;
}

/**
 * A client too slow to send its request (408) or sending a malformed one (400): answered in the
 * envelope and disconnected, before any route runs.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const apiError = timeout
    ? new ApiError('request_timeout', 'The request did not arrive in time; the connection is closed.')
    : new ApiError('validation_failed', 'The request is not valid HTTP.');
  const body = JSON.stringify(errorEnvelope(apiError));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${apiError.status} ${timeout ? 'Request Timeout' : 'Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** A rate-limit window in words: "1 minute", "15 minutes", "90 seconds". */
function windowText(ms: number): string {
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return ms % 60_000 === 0 ? unit(ms / 60_000, 'minute') : unit(Math.round(ms / 100) / 10, 'second');
}

export async function buildApp(deps: AppDeps): Promise<Api> {
  // Typed as Fastify's logger interface (which pino's satisfies) so the instance is the `Api`
  // that plugins and route modules are written against.
  const loggerInstance: FastifyBaseLogger = deps.log;
  const app = Fastify({
    loggerInstance,
    bodyLimit: deps.config.bodyLimitBytes,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : `req_${randomUUID()}`;
    },
    // Types are never coerced and unknown fields never silently dropped: "12" is not 12, and a
    // misspelt field is a 400, not a no-op.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false }, plugins: [requestKeywords] },
    // Slow clients are cut off: the headers and the body must arrive within the request timeout
    // (408), checked every second (a quarter of the timeout when that is shorter); an idle
    // connection closes after twice that. The check must come well before the idle close, which
    // would end the connection without the 408 (a 1 s check against a 2 s close raced on a loaded machine).
    requestTimeout: deps.config.httpRequestTimeoutMs,
    connectionTimeout: deps.config.httpRequestTimeoutMs * 2,
    clientErrorHandler: answerClientError,
    http: {
      headersTimeout: deps.config.httpRequestTimeoutMs,
      requestTimeout: deps.config.httpRequestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(deps.config.httpRequestTimeoutMs / 4)),
    },
    routerOptions: { ignoreTrailingSlash: true },
    // Errors the router raises before any route or error handler runs (an undecodable
    // percent-escape, a path parameter over maxParamLength) get the envelope too.
    // (A void callback: the reply is a thenable, and returning it would read as a promise to wait for.)
    frameworkErrors: (err, req, reply) => {
      // A mangled payment page address is a page that does not exist, in HTML like the pages.
      if (isPaymentPagePath(req.url)) {
        sendPageNotFound(reply, req.headers['accept-language']);
        return;
      }
      // A missing or malformed key is still the answer first (spec section 5), as on every route;
      // told from the header alone: these requests passed no limiter, so they buy no key lookup.
      if (req.url.startsWith('/v1/')) {
        try {
          presentKey(req);
        } catch (keyErr) {
          if (keyErr instanceof ApiError) {
            sendError(reply, keyErr);
            return;
          }
        }
      }
      if (err.code === 'FST_ERR_BAD_URL') sendError(reply, new ApiError('validation_failed', 'The request path is not a valid URL component.'));
      else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') sendError(reply, new ApiError('validation_failed', 'A path parameter of the request is too long.'));
      else sendError(reply, new ApiError('internal_error', 'An internal error occurred; it has been logged. Retry later.'));
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // JSON only. An empty body with a JSON content type counts as no body (clients send one on
  // POST /send); anything unparseable is the API's invalid_json.
  // Fastify's default JSON parser is the callback form (it calls done before it returns); its type
  // also admits the promise form, which it never takes.
  const jsonParser = app.getDefaultJsonParser('error', 'error') as CallbackBodyParser;
  // ignoreBOM: a byte order mark stays in the text, for Fastify's parser to skip as before.
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    // JSON is UTF-8 (RFC 8259): bytes that are not would be read as U+FFFD and stored that way.
    let text: string;
    try {
      text = strictUtf8.decode(typeof body === 'string' ? Buffer.from(body) : body);
    } catch {
      return done(new ApiError('invalid_json', 'The request body is not valid UTF-8; JSON bodies must be UTF-8.'), undefined);
    }
    if (text.trim() === '') return done(null, undefined);
    jsonParser(req, text, (err, value) => {
      if (err) {
        // Fastify's parser also refuses valid JSON with keys that would reach Object.prototype.
        const prototypeKey = parsesAsJson(text);
        return done(
          new ApiError('invalid_json', prototypeKey ? 'The request body has a "__proto__" or "constructor.prototype" key, which is refused.' : 'The request body is not valid JSON.'),
          undefined,
        );
      }
      // Refused here, before anything walks it recursively (the idempotency fingerprint's stable
      // stringify overflowed the stack on 10,000 levels: a 500).
      if (nestedDeeperThan(value, MAX_JSON_DEPTH)) {
        return done(new ApiError('validation_failed', `The request body nests objects or arrays deeper than ${MAX_JSON_DEPTH} levels.`, 'body'), undefined);
      }
      done(null, value);
    });
  });
  app.removeContentTypeParser('text/plain');

  app.addHook('preHandler', async (req) => {
    if (containsUnstorable(req.params) || containsUnstorable(req.query) || containsUnstorable(req.body)) {
      throw new ApiError('validation_failed', 'Strings in the request must be valid Unicode without the NUL character (U+0000).');
    }
  });

  app.addHook('onSend', async (req, reply) => {
    reply.header('request-id', req.id);
  });

  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    const apiError = toApiError(err);
    if (apiError) {
      if (apiError.status >= 500) req.log.error({ err }, 'request failed');
      return sendError(reply, apiError);
    }
    req.log.error({ err }, 'request failed');
    return sendError(reply, new ApiError('internal_error', 'An internal error occurred; it has been logged. Retry later.'));
  });

  app.setNotFoundHandler((req, reply) =>
    sendError(reply, new ApiError('route_not_found', `No route ${req.method} ${req.url.split('?')[0]}.`)),
  );

  // Before any route: the OpenAPI document is generated from the routes' schemas.
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Stablecoin payments: invoices, payment links, products, subscriptions, keys', version: '1.0.0' },
      // One base address for both environments (the key decides which one a request acts on).
      servers: [
        {
          url: '{base_url}',
          description: 'The service; sandbox and live share it',
          variables: { base_url: { default: 'http://localhost:3000', description: 'scheme, host and port the API is served on' } },
        },
      ],
      tags: [
        { name: 'invoices', description: 'Create, edit, send, void, delete, list and download invoices; reminders' },
        { name: 'payment links', description: 'Hosted payment pages for a price or a custom amount' },
        { name: 'products', description: 'Products and their prices' },
        { name: 'subscriptions', description: 'Recurring pull payments on a price' },
        { name: 'credentials', description: 'API keys of the environment' },
        { name: 'test helpers', description: 'Sandbox only: what the on-chain payment detector would do' },
      ],
      components: {
        securitySchemes: {
          ApiKey: { type: 'apiKey', in: 'header', name: 'Api-Key' },
          XApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        },
      },
      security: [{ ApiKey: [] }, { XApiKey: [] }],
    },
  });
  // The histogram only: /metrics is served on the internal METRICS_PORT, not here.
  if (deps.metrics) await app.register(metricsPlugin, { metrics: deps.metrics, serve: false });
  if (deps.readiness) await app.register(healthPlugin, { db: deps.pool, readiness: deps.readiness });
  for (const plugin of deps.plugins ?? []) await app.register(plugin);
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // The hosted payment page (HTML, outside /v1 and its key authentication).
  await paymentPageRoutes(app, deps);

  await app.register(async (v1) => {
    // Failed authentications per client address, counted in memory and checked first: a client
    // guessing keys gets 429 before any database work, and costs the others nothing. The point is
    // taken before the lookup and given back once the key is accepted (or the request ends in
    // anything but a 401), so concurrent bad keys cannot all pass the check at once.
    const authFailures = createFailureLimiter({ maxFailures: deps.config.authFailureLimit, windowMs: deps.config.authFailureWindowMs });
    const holdingPoint = new WeakSet<FastifyRequest>();
    const settleAuth = (req: FastifyRequest, outcome: 'succeeded' | 'failed') => {
      if (holdingPoint.delete(req)) authFailures.release(req.ip, outcome);
    };
    v1.addHook('onRequest', async (req, reply) => {
      const waitMs = await authFailures.take(req.ip);
      if (waitMs > 0) {
        reply.header('retry-after', String(Math.ceil(waitMs / 1000)));
        throw new ApiError('rate_limited', 'Too many requests with a missing or invalid API key from this address; retry after the Retry-After delay.');
      }
      holdingPoint.add(req);
    });
    v1.addHook('onResponse', async (req, reply) => {
      settleAuth(req, reply.statusCode === 401 ? 'failed' : 'succeeded');
    });
    // A client gone before its key was decided may never get onResponse: its point must not stay
    // in flight for ever. Counted as a failure, so aborting cannot buy checks back.
    v1.addHook('onRequestAbort', async (req) => {
      settleAuth(req, 'failed');
    });
    await v1.register(rateLimit, {
      max: deps.config.rateLimitMax,
      timeWindow: deps.config.rateLimitWindowMs,
      // Per key (hashed: raw keys never sit in memory longer than a request); per IP without a
      // well-formed one, so made-up keys cannot each buy a fresh budget.
      keyGenerator: (req) => {
        try {
          return `k:${presentKey(req).hash.toString('base64')}`;
        } catch {
          return `ip:${req.ip}`;
        }
      },
      // ctx.after is the time left until the window resets, not the window: name the window.
      errorResponseBuilder: (_req, ctx) =>
        new ApiError('rate_limited', `Too many requests: at most ${ctx.max} per ${windowText(deps.config.rateLimitWindowMs)}. Retry after the Retry-After delay.`),
    });
    // No v1 route takes query parameters: an unknown one is a 400, like an unknown body field.
    v1.addHook('onRoute', (route) => {
      route.schema ??= {};
      route.schema.querystring ??= { type: 'object', properties: {}, additionalProperties: false };
      // A route with no body schema takes no body: a field sent to one (send_email on /send,
      // amount on the sandbox pay helper) is refused below rather than ignored while the action
      // goes ahead. Not a body schema: Fastify would refuse the absent body such routes get.
      if (!route.schema.body) route.config = { ...route.config, takesNoBody: true };
      const method = Array.isArray(route.method) ? route.method[0] : route.method;
      // Every operation has a stable operationId (generated clients are named after them), and
      // every POST documents the Idempotency-Key header its hooks honour.
      route.schema.operationId ??= operationIdFor(method, route.url);
      if (method === 'POST') route.schema.headers ??= IdempotencyKeyHeaders;
    });
    v1.decorateRequest('auth', null as never);
    v1.decorateRequest('presentedKey', null as never);
    v1.addHook('onRequest', async (req) => {
      if (req.routeOptions.config.auth === 'in-query') req.presentedKey = presentKey(req);
      else {
        req.auth = await authenticate(deps.pool, req);
        // Accepted: the point goes back now, not at the end of a long request.
        settleAuth(req, 'succeeded');
        requireRouteAccess(req.auth, req.method, req.routeOptions.config);
      }
    });
    v1.addHook('preValidation', async (req) => {
      // Every v1 query parameter takes one value: `limit=1&limit=2` is refused as such, rather
      // than as a value of the wrong type.
      const repeated = Object.entries((req.query ?? {}) as Record<string, unknown>).find(([, v]) => Array.isArray(v));
      if (repeated) throw new ApiError('validation_failed', `query parameter ${clip(repeated[0])} is given more than once`, clip(repeated[0]));
      if (!req.routeOptions.config.takesNoBody || isEmptyBody(req.body)) return;
      const field = typeof req.body === 'object' && !Array.isArray(req.body) ? Object.keys(req.body as object)[0] : null;
      throw new ApiError(
        'validation_failed',
        `${req.method} ${req.routeOptions.url ?? req.url.split('?')[0]} takes no request body${field === null ? '' : `; \`${field}\` is not a field of this request`}.`,
        field ?? 'body',
      );
    });
    // The route that authenticates in its own query ('in-query') refused the request as malformed
    // before its query ran (the schema, a NUL in its id): a missing, unknown or revoked key is still
    // the answer first (spec section 5), as on every other route. The error goes on to the
    // application's handler: the key's 401 if it fails, else the original error. Only for those:
    // a rate-limited request must not buy a key lookup.
    v1.setErrorHandler(async (err: FastifyError, req) => {
      const malformed = err.validation !== undefined || (err instanceof ApiError && err.code === 'validation_failed');
      if (malformed && req.routeOptions.config.auth === 'in-query' && !req.auth) await authenticate(deps.pool, req);
      throw err;
    });
    // After authentication (keys belong to an account and environment), for every POST below.
    await v1.register(idempotencyPlugin, { pool: deps.pool });
    await invoiceRoutes(v1, deps);
    await invoiceLifecycleRoutes(v1, deps);
    await paymentLinkRoutes(v1, deps);
    await productRoutes(v1, deps);
    await subscriptionRoutes(v1, deps);
    await credentialRoutes(v1, deps);
    await testHelperRoutes(v1, deps);
    await eventRoutes(v1, deps);
    await paymentRoutes(v1, deps);
    await webhookEndpointRoutes(v1, deps);
  }, { prefix: '/v1' });

  return app;
}
