import { findEvent, listEvents } from '../../db/events.js';
import { isEventType } from '../../domain/events.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { Event, EventIdParams, ListEventsQuery } from '../schemas/index.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { presentEvent } from '../presenters.js';
import { Data, ListOf } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

export async function eventRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  app.get(
    '/events',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['events'],
        summary: 'List events, newest first (cursor pagination: limit, starting_after, ending_before; filter: type)',
        querystring: ListEventsQuery,
        response: { 200: ListOf(Event), ...errorResponses },
      },
    },
    async (req) => {
      const type = req.query.type ?? null;
      if (type !== null && !isEventType(type)) {
        throw new ApiError('validation_failed', `Unknown event type ${JSON.stringify(type)}.`, 'type');
      }
      return listBody(await listEvents(pool, req.auth, type, pageRequest(req.query)), 'event', (e) => presentEvent(e, deps.config.chains));
    },
  );

  app.get(
    '/events/:eventId',
    { schema: { tags: ['events'], summary: 'Retrieve an event', params: EventIdParams, response: { 200: Data(Event), ...errorResponses } } },
    async (req) => {
      const row = await findEvent(pool, req.auth, req.params.eventId);
      if (!row) throw notFound('event', req.params.eventId);
      return { data: presentEvent(row, deps.config.chains) };
    },
  );
}
