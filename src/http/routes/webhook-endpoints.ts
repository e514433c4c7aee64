// Webhook endpoints of the key's account and environment. Full-access keys only: an endpoint's
// secret and deliveries are as sensitive as the key itself.
import type { FastifyBaseLogger } from 'fastify';
import { withTransaction } from '../../db/pool.js';
import { listDeliveries } from '../../db/webhook-deliveries.js';
import { deleteEndpoint, findEndpoint, insertEndpoint, listEndpoints, lockEndpointsForWrite, rotateSecret, updateEndpoint, type WebhookEndpointRow } from '../../db/webhook-endpoints.js';
import type { Environment } from '../../domain/environment.js';
import { checkEnabledEvents } from '../../domain/events.js';
import { newId } from '../../domain/ids.js';
import { checkEndpointUrl, MAX_WEBHOOK_ENDPOINTS, newWebhookSecret } from '../../domain/webhooks.js';
import { ApiError, notFound } from '../../errors.js';
import { AddressRefusedError, resolvePublicAddresses } from '../../webhooks/address-guard.js';
import type { AppDeps } from '../types.js';
import type { AuthContext } from '../auth.js';
import {
  CreateWebhookEndpointBody,
  DeletedEndpoint,
  DeliveriesQuery,
  EndpointIdParams,
  UpdateWebhookEndpointBody,
  WebhookDelivery,
  WebhookEndpoint,
} from '../schemas/index.js';
import { coerceLimit, DEFAULT_PAGE_SIZE } from '../pagination.js';
import { presentWebhookDelivery, presentWebhookEndpoint } from '../presenters.js';
import { Data, ErrorEnvelope, ListOf } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

/** The old secret keeps signing beside the new one this long after a rotation. */
export const SECRET_OVERLAP_MS = 24 * 3600 * 1000;

export async function webhookEndpointRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;
  const allowPrivate = deps.config.webhooks.allowPrivateNetworks;
  const tags = ['webhook endpoints'];

  /** Shape, then the host's addresses: refused when any is not public (unless private networks are allowed). */
  async function checkUrl(raw: string, environment: Environment, log: FastifyBaseLogger): Promise<string> {
    const verdict = checkEndpointUrl(raw, environment);
    if (!verdict.ok) throw new ApiError('webhook_url_invalid', verdict.message, 'url');
    try {
      await resolvePublicAddresses(verdict.value.hostname, allowPrivate);
    } catch (err) {
      if (!(err instanceof AddressRefusedError)) throw err;
      log.info({ refused: err.detail }, 'webhook url refused');
      throw new ApiError('webhook_url_not_public', `url is refused: ${err.message}. Webhooks are delivered to public addresses only.`, 'url');
    }
    return verdict.value.toString();
  }

  const urlTaken = (id: string) =>
    new ApiError('webhook_endpoint_exists', `The webhook endpoint ${id} already has this url; update its enabled_events instead of adding another.`, 'url');

  function enabledEvents(list: string[]): string[] {
    const checked = checkEnabledEvents(list);
    if (!checked.ok) throw new ApiError('validation_failed', checked.message, 'enabled_events');
    return checked.value;
  }

  async function load(auth: AuthContext, id: string): Promise<WebhookEndpointRow> {
    const row = await findEndpoint(pool, auth, id);
    if (!row) throw notFound('webhook endpoint', id);
    return row;
  }

  app.post(
    '/webhook_endpoints',
    {
      // The secret exists once, in this response: an Idempotency-Key replay answers without it.
      config: { fullAccessOnly: true, idempotencyOmit: ['secret'] },
      schema: {
        tags,
        summary: 'Register a webhook endpoint; its signing secret is returned once',
        body: CreateWebhookEndpointBody,
        response: { 200: Data(WebhookEndpoint), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      const events = enabledEvents(req.body.enabled_events);
      const url = await checkUrl(req.body.url, req.auth.environment, req.log);
      const secret = newWebhookSecret();
      const row = await withTransaction(pool, async (tx) => {
        const existing = await lockEndpointsForWrite(tx, req.auth, url);
        if (existing.sameUrlId) throw urlTaken(existing.sameUrlId);
        if (existing.count >= MAX_WEBHOOK_ENDPOINTS) {
          throw new ApiError(
            'webhook_endpoint_limit_reached',
            `This environment already has ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints, the most it can have; delete one first (one endpoint can take every event: enabled_events ["*"]).`,
          );
        }
        return insertEndpoint(tx, { id: newId('we'), scope: req.auth, url, description: req.body.description ?? null, enabledEvents: events, secret });
      });
      return { data: presentWebhookEndpoint(row, secret) };
    },
  );

  app.get(
    '/webhook_endpoints',
    { config: { fullAccessOnly: true }, schema: { tags, summary: 'List the webhook endpoints of the environment, oldest first', response: { 200: ListOf(WebhookEndpoint), ...errorResponses } } },
    async (req) => {
      return { data: (await listEndpoints(pool, req.auth)).map((w) => presentWebhookEndpoint(w)), has_more: false };
    },
  );

  app.get(
    '/webhook_endpoints/:endpointId',
    { config: { fullAccessOnly: true }, schema: { tags, summary: 'Retrieve a webhook endpoint', params: EndpointIdParams, response: { 200: Data(WebhookEndpoint), ...errorResponses } } },
    async (req) => {
      return { data: presentWebhookEndpoint(await load(req.auth, req.params.endpointId)) };
    },
  );

  app.patch(
    '/webhook_endpoints/:endpointId',
    {
      config: { fullAccessOnly: true },
      schema: {
        tags,
        summary: 'Update a webhook endpoint (url, enabled_events, description, status)',
        params: EndpointIdParams,
        body: UpdateWebhookEndpointBody,
        response: { 200: Data(WebhookEndpoint), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      const b = req.body;
      const events = b.enabled_events === undefined ? undefined : enabledEvents(b.enabled_events);
      // An unknown id is a 404 before the URL is looked at (no DNS work, nothing said about the host).
      await load(req.auth, req.params.endpointId);
      const url = b.url === undefined ? undefined : await checkUrl(b.url, req.auth.environment, req.log);
      const row = await withTransaction(pool, async (tx) => {
        if (url !== undefined) {
          const existing = await lockEndpointsForWrite(tx, req.auth, url);
          if (existing.sameUrlId && existing.sameUrlId !== req.params.endpointId) throw urlTaken(existing.sameUrlId);
        }
        const found = await findEndpoint(tx, req.auth, req.params.endpointId, true);
        if (!found) throw notFound('webhook endpoint', req.params.endpointId);
        return updateEndpoint(tx, found.id, { url, description: b.description, enabledEvents: events, status: b.status });
      });
      return { data: presentWebhookEndpoint(row) };
    },
  );

  app.delete(
    '/webhook_endpoints/:endpointId',
    {
      config: { fullAccessOnly: true },
      schema: {
        tags,
        summary: 'Delete a webhook endpoint; nothing more is delivered to it',
        params: EndpointIdParams,
        response: { 200: Data(DeletedEndpoint), ...errorResponses },
      },
    },
    async (req) => {
      if (!(await deleteEndpoint(pool, req.auth, req.params.endpointId))) throw notFound('webhook endpoint', req.params.endpointId);
      return { data: { id: req.params.endpointId, deleted: true } };
    },
  );

  app.post(
    '/webhook_endpoints/:endpointId/rotate_secret',
    {
      config: { fullAccessOnly: true, idempotencyOmit: ['secret'] },
      schema: {
        tags,
        summary: 'Replace the signing secret; the old one keeps signing beside the new one for 24 hours',
        params: EndpointIdParams,
        response: { 200: Data(WebhookEndpoint), ...errorResponses },
      },
    },
    async (req) => {
      const secret = newWebhookSecret();
      const row = await withTransaction(pool, async (tx) => {
        const found = await findEndpoint(tx, req.auth, req.params.endpointId, true);
        if (!found) throw notFound('webhook endpoint', req.params.endpointId);
        return rotateSecret(tx, found.id, secret, SECRET_OVERLAP_MS);
      });
      return { data: presentWebhookEndpoint(row, secret) };
    },
  );

  app.get(
    '/webhook_endpoints/:endpointId/deliveries',
    {
      config: { fullAccessOnly: true },
      preValidation: coerceLimit,
      schema: {
        tags,
        summary: 'Deliveries to this endpoint, newest first, each with its attempts (status code, duration, error) and next retry',
        params: EndpointIdParams,
        querystring: DeliveriesQuery,
        response: { 200: ListOf(WebhookDelivery), ...errorResponses },
      },
    },
    async (req) => {
      const endpoint = await load(req.auth, req.params.endpointId);
      const page = await listDeliveries(pool, endpoint.id, { limit: req.query.limit ?? DEFAULT_PAGE_SIZE, startingAfter: req.query.starting_after ?? null });
      if (!page.cursorFound) {
        throw new ApiError('invalid_cursor', 'starting_after names no delivery of this endpoint.', 'starting_after');
      }
      return { data: page.deliveries.map(presentWebhookDelivery), has_more: page.hasMore };
    },
  );
}
