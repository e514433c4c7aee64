// Schema validation failures as one sentence naming the field and the rule
// (`line_items[2].quantity must be an integer`, `unknown field "max_amount"`), from Ajv's errors.
import type { FastifySchemaValidationError } from 'fastify';
import { ApiError } from '../errors.js';
import { MAX_LINE_ITEMS } from '../domain/invoice-limits.js';
import { MAX_METADATA_KEY } from '../domain/invoice-limits.js';
import { HTTP_URL_KEYWORD, INSTANT_KEYWORD } from './ajv-keywords.js';

/** `/line_items/2/quantity` -> `line_items[2].quantity`. */
export function fieldPath(instancePath: string): string {
  let out = '';
  for (const raw of instancePath.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

const FORMAT_RULES: Record<string, string> = {
  email: 'must be an email address',
  'date-time': 'must be an RFC 3339 date-time such as 2026-01-31T09:00:00Z',
  uri: 'must be an absolute URL',
};

type Where = 'body' | 'querystring' | 'params' | 'headers' | string | undefined;

function subject(where: Where, path: string): string {
  if (where === 'querystring') return `query parameter ${path}`;
  if (where === 'params') return `path parameter ${path}`;
  return path;
}

/** The ApiError for the first failure Ajv reports (allErrors is off: there is one). */
export function validationError(errors: FastifySchemaValidationError[], where: Where): ApiError {
  // A union (anyOf) reports each branch's failure, then its own: the union's is the one to explain.
  const union = errors.find((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  // A nullable value (a union with null) that is not null failed its other branch: explain that.
  if (union) {
    const others = errors.filter((x) => x !== union && !(x.keyword === 'type' && (x.params as { type?: unknown }).type === 'null' && x.instancePath === union.instancePath));
    const isNullable = others.length < errors.length - 1;
    if (isNullable && others.length > 0 && !others.some((x) => x.keyword === 'anyOf' || x.keyword === 'oneOf')) return validationError(others, where);
  }
  // A key of a map (metadata) failing its rule is reported as the key's failure, then the map's.
  const e = union ?? errors.find((x) => x.keyword === 'propertyNames') ?? errors[0];
  const path = fieldPath(e.instancePath);
  const p = (e.params ?? {}) as Record<string, unknown>;
  const name = path === '' ? (where === 'querystring' ? 'the query' : where === 'params' ? 'the path' : 'the body') : subject(where, path);
  let message: string;
  switch (e.keyword) {
    case 'additionalProperties': {
      // Named back to the client, but not echoed whole: a field name can be any size.
      const field = clip(String(p.additionalProperty));
      if (where === 'querystring') return new ApiError('validation_failed', `unknown query parameter "${field}"`, field);
      message = path === '' ? `unknown field "${field}"` : `unknown field "${field}" in ${path}`;
      return new ApiError('validation_failed', message, path === '' ? field : `${path}.${field}`);
    }
    case 'required': {
      const field = String(p.missingProperty);
      const full = path === '' ? field : `${path}.${field}`;
      return new ApiError('validation_failed', `${subject(where, full)} is required`, full);
    }
    case 'type':
      message = `${name} must be ${String(p.type).split(',').map((t) => TYPE_NAMES[t] ?? t).join(' or ')}`;
      break;
    case 'minLength':
      message = Number(p.limit) === 1 ? `${name} must not be empty` : `${name} must be at least ${String(p.limit)} characters long`;
      break;
    case 'maxLength':
      message = `${name} must be at most ${String(p.limit)} characters long`;
      break;
    case 'minimum':
      message = `${name} must be at least ${String(p.limit)}`;
      break;
    case 'maximum':
      message = `${name} must be at most ${String(p.limit)}`;
      break;
    case 'exclusiveMinimum':
      message = `${name} must be greater than ${String(p.limit)}`;
      break;
    case 'exclusiveMaximum':
      message = `${name} must be less than ${String(p.limit)}`;
      break;
    case 'minItems':
      message = `${name} must have at least ${String(p.limit)} items`;
      break;
    case 'maxItems':
      if (path === 'line_items') {
        return new ApiError('too_many_line_items', `line_items must have at most ${MAX_LINE_ITEMS} items`, 'line_items');
      }
      message = `${name} must have at most ${String(p.limit)} items`;
      break;
    case 'maxProperties':
      message = `${name} must have at most ${String(p.limit)} keys`;
      break;
    case 'propertyNames':
      message = `${name} has a key that is empty or too long (keys are 1 to ${MAX_METADATA_KEY} characters)`;
      break;
    case 'format':
      message = `${name} ${FORMAT_RULES[String(p.format)] ?? `must be a valid ${String(p.format)}`}`;
      break;
    case 'pattern':
      message = `${name} ${e.message === undefined ? 'has an invalid format' : describePattern(String(p.pattern))}`;
      break;
    case 'const':
      message = `${name} must be ${JSON.stringify(p.allowedValue)}`;
      break;
    case 'enum':
      message = `${name} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'anyOf':
    case 'oneOf': {
      const allowed = errors.filter((x) => x.keyword === 'const' && x.instancePath === e.instancePath).map((x) => JSON.stringify((x.params as { allowedValue: unknown }).allowedValue));
      message = allowed.length ? `${name} must be one of ${allowed.join(', ')}` : `${name} has an unexpected shape`;
      break;
    }
    case INSTANT_KEYWORD:
      message = `${name} must be an instant between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z (offset applied)`;
      break;
    case HTTP_URL_KEYWORD:
      message = `${name} must be an absolute http or https URL with a host`;
      break;
    default:
      message = `${name} is invalid (${e.message ?? e.keyword})`;
  }
  return new ApiError('validation_failed', message, path || undefined);
}

const MAX_ECHOED = 100;
/** A client's name for something, echoed back: at most 100 characters (code points, so no half of a pair). */
export function clip(text: string): string {
  const chars = Array.from(text);
  return chars.length <= MAX_ECHOED ? text : `${chars.slice(0, MAX_ECHOED).join('')}…`;
}

function describePattern(pattern: string): string {
  if (pattern.includes('\\d{4}-\\d{2}-\\d{2}')) return FORMAT_RULES['date-time'];
  if (pattern.startsWith('^https?://')) return 'must be an absolute http or https URL with a host';
  return 'has an invalid format';
}
