import type { Environment } from '../domain/environment.js';

/** The account and environment every merchant-owned row belongs to; each query filters by it. */
export interface Scope {
  accountId: string;
  environment: Environment;
}
