import { eventCursor, findEvent, listEvents } from '../../db/events.js';
import { isEventType } from '../../domain/events.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../app.js';
import { Event, EventIdParams, List, ListEventsQuery } from '../event-schemas.js';
import { parseLimit, unknownCursor } from '../pagination.js';
import { presentEvent } from '../presenters.js';
import { Data } from '../schemas.js';
import type { Api } from '../types.js';
import { errorResponses } from './invoices.js';

export async function eventRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  app.get(
    '/events',
    {
      schema: {
        tags: ['events'],
        summary: 'List events, newest first (cursor pagination: limit, starting_after; filter: type)',
        querystring: ListEventsQuery,
        response: { 200: List(Event), ...errorResponses },
      },
    },
    async (req) => {
      const limit = parseLimit(req.query.limit);
      const type = req.query.type ?? null;
      if (type !== null && !isEventType(type)) {
        throw new ApiError('validation_failed', `Unknown event type ${JSON.stringify(type)}.`, 'type');
      }
      let beforeSeq: string | null = null;
      if (req.query.starting_after !== undefined) {
        beforeSeq = await eventCursor(pool, req.auth, req.query.starting_after);
        if (beforeSeq === null) throw unknownCursor(req.query.starting_after);
      }
      const page = await listEvents(pool, req.auth, { limit, beforeSeq, type });
      return { data: page.events.map(presentEvent), has_more: page.hasMore };
    },
  );

  app.get(
    '/events/:eventId',
    { schema: { tags: ['events'], summary: 'Retrieve an event', params: EventIdParams, response: { 200: Data(Event), ...errorResponses } } },
    async (req) => {
      const row = await findEvent(pool, req.auth, req.params.eventId);
      if (!row) throw notFound('event', req.params.eventId);
      return { data: presentEvent(row) };
    },
  );
}
