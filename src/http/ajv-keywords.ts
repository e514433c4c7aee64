// Request rules JSON Schema's formats cannot say, as Ajv keywords on the schemas (published in the
// OpenAPI document as `x-` extensions): an instant within 1970-9999 once its offset is applied,
// and a URL that is absolute http(s) with a host (`format: uri` accepts "http://").
import type { Plugin } from 'ajv';
import { isInstantInRange } from '../domain/invoice-limits.js';

export const INSTANT_KEYWORD = 'x-instant-1970-9999';
export const HTTP_URL_KEYWORD = 'x-http-url';

export function isHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '' && /^https?:\/\/[^/?#]/i.test(value);
  } catch {
    return false;
  }
}

export const requestKeywords: Plugin<unknown> = (ajv) => {
  ajv.addKeyword({ keyword: INSTANT_KEYWORD, type: 'string', schemaType: 'boolean', validate: (on: boolean, data: string) => !on || isInstantInRange(data), errors: false });
  ajv.addKeyword({ keyword: HTTP_URL_KEYWORD, type: 'string', schemaType: 'boolean', validate: (on: boolean, data: string) => !on || isHttpUrl(data), errors: false });
  return ajv;
};
