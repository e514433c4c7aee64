// Request and response schemas, written once with TypeBox, one module per resource: Fastify
// validates requests with them, serialises responses with them, and @fastify/swagger publishes
// them as the OpenAPI document. Domain enumerations come from src/domain (parts.ts `literals`).
export * from './common.js';
export * from './credentials.js';
export * from './events.js';
export * from './invoices.js';
export * from './parts.js';
export * from './payment-links.js';
export * from './payment-page.js';
export * from './payments.js';
export * from './products.js';
export * from './subscriptions.js';
