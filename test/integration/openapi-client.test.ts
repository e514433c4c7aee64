// The OpenAPI document as its users consume it: it passes a standard linter's recommended rules
// (Redocly) without errors, every operation has a unique operationId, path parameters are named
// one way per resource, and a client generated from it (openapi-typescript types, openapi-fetch
// calls) type-checks and runs a create -> send -> list -> void flow against the real server.
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiFixture, type ApiFixture } from '../helpers/context.js';
import { postSubscriptionCheckout, seedSubscriptionFromCheckout, subscriptionChainsFile, testOperatorAddress } from '../helpers/subscriptions.js';

type RunFlow = (baseUrl: string, apiKey: string, email: string) => Promise<{ invoiceId: string; sentCode: string | null } & Record<string, unknown>>;
type RunSubscriptionFlow = (baseUrl: string, apiKey: string, subscriptionId: string, email: string) => Promise<Record<string, unknown>>;
type Operation = { operationId?: string; parameters?: { in: string; name: string }[]; responses: Record<string, unknown> };
type Doc = OpenAPI3 & { paths: Record<string, Record<string, Operation>>; servers?: { url: string }[] };

let fx: ApiFixture;
let baseUrl: string;
let doc: Doc;

beforeAll(async () => {
  // A sandbox chain with a SubscriptionManager and a relayer, for the subscription flow.
  fx = await startApiFixture({ CHAINS_FILE: subscriptionChainsFile() }, { operatorAddress: testOperatorAddress });
  await fx.api.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(fx.api.app.server.address() as AddressInfo).port}`;
  // Read the way a client would: over HTTP.
  doc = (await (await fetch(`${baseUrl}/v1/openapi.json`)).json()) as Doc;
});
afterAll(async () => {
  await fx?.close();
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ method, path, op })));

describe('the OpenAPI document', () => {
  it('passes the Redocly recommended rules without errors', async () => {
    const problems = await lintFromString({
      source: JSON.stringify(doc),
      absoluteRef: `${baseUrl}/v1/openapi.json`,
      config: await createConfig({ extends: ['recommended'] }),
    });
    const errors = problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
    expect(errors).toEqual([]);
    const warnings = problems.filter((p) => p.severity !== 'error').map((p) => p.ruleId);
    console.info(`redocly recommended: 0 errors, ${warnings.length} warnings (${[...new Set(warnings)].join(', ') || 'none'})`);
  });

  it('has servers, and a unique operationId on every operation', () => {
    expect(doc.servers?.length).toBeGreaterThan(0);
    const ids = operations().map(({ op }) => op.operationId);
    expect(ids.filter((id) => !id)).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(28);
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z0-9]*$/);
  });

  it('names path parameters one way: <resource>Id, the same for a collection wherever it appears', () => {
    const byCollection = new Map<string, Set<string>>();
    for (const path of Object.keys(doc.paths)) {
      const segments = path.split('/');
      segments.forEach((segment, i) => {
        const param = /^\{(\w+)\}$/.exec(segment)?.[1];
        if (!param) return;
        expect(param).toMatch(/^[a-z][A-Za-z]*Id$/);
        const collection = segments[i - 1];
        if (!byCollection.has(collection)) byCollection.set(collection, new Set());
        byCollection.get(collection)!.add(param);
      });
    }
    for (const [collection, names] of byCollection) expect([collection, [...names]]).toEqual([collection, [[...names][0]]]);
    expect(Object.fromEntries([...byCollection].map(([c, n]) => [c, [...n][0]]))).toMatchObject({
      invoices: 'invoiceId',
      'payment-links': 'paymentLinkId',
      products: 'productId',
      credentials: 'credentialId',
      subscriptions: 'subscriptionId',
    });
    // Declared wherever used.
    for (const { path, op } of operations()) {
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name).sort();
      expect([path, declared]).toEqual([path, inPath]);
    }
  });

  it('documents Idempotency-Key on every POST', () => {
    for (const { method, path, op } of operations()) {
      if (method !== 'post') continue;
      expect([path, (op.parameters ?? []).some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key')]).toEqual([path, true]);
    }
  });
});

describe('a client generated from the document', () => {
  it('type-checks (openapi-typescript) and runs create, send, list, void, the account and the payments through openapi-fetch', async () => {
    const dir = fileURLToPath(new URL('../openapi/', import.meta.url));
    mkdirSync(`${dir}generated`, { recursive: true });
    writeFileSync(`${dir}generated/api.ts`, `// Generated by openapi-typescript from GET /v1/openapi.json; do not edit.\n${astToString(await openapiTS(doc))}`);

    // The flow compiles against the generated types only if the document says what the code uses.
    const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
    const checked = await promisify(execFile)(process.execPath, [tsc, '-p', `${dir}tsconfig.json`]).then(
      () => ({ ok: true, out: '' }),
      (err: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
    );
    expect(checked.out).toBe('');
    expect(checked.ok).toBe(true);

    // Imported by URL: the root type-check must not follow it into generated/ (absent there).
    const flow = (await import(new URL('../openapi/client-flow.ts', import.meta.url).href)) as { runInvoiceFlow: RunFlow; runSubscriptionFlow: RunSubscriptionFlow };
    const { runInvoiceFlow, runSubscriptionFlow } = flow;
    const email = `typed-client-${Date.now()}@example.test`;
    const result = await runInvoiceFlow(baseUrl, fx.merchant.keys.sandbox, email);
    expect(result).toMatchObject({
      createdStatus: 'draft',
      replayedHeader: 'true',
      replayedSameId: true,
      sentStatus: 'open',
      listedIds: [result.invoiceId],
      hasMore: false,
      voidedStatus: 'void',
      refusedStatus: 400,
      refusedCode: 'invoice_not_voidable',
      pdfType: 'application/pdf',
      settlementAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
      // Sent before the account had an address, and on base-sepolia (no fee proxy): no instructions.
      paymentInstructions: null,
      invoicePayments: 0,
      unmatchedListed: 0,
      missingPaymentCode: 'resource_missing',
      applyMissingCode: 'resource_missing',
    });
    expect(result.sentCode).toMatch(/^TEST-INV-\d{6}$/);

    // A subscription (its checkout through the page's endpoint, the watcher's part in SQL), then
    // the merchant's calls on it through the generated client.
    const key = fx.merchant.keys.sandbox;
    const product = await fx.api.app.inject({ method: 'POST', url: '/v1/products', headers: { 'api-key': key, 'content-type': 'application/json' }, payload: { name: 'Plan', prices: [{ amount: '4', cadence: 'weekly' }] } });
    const link = await fx.api.app.inject({ method: 'POST', url: '/v1/payment-links', headers: { 'api-key': key, 'content-type': 'application/json' }, payload: { name: 'Plan', price_id: product.json().data.prices[0].id } });
    const subscriberEmail = `typed-subscriber-${Date.now()}@example.test`;
    const checkout = await postSubscriptionCheckout(fx.api.app, link.json().data.id, subscriberEmail);
    expect(checkout.status, JSON.stringify(checkout.body)).toBe(200);
    const subscriptionId = await seedSubscriptionFromCheckout(fx.api.pool, checkout.body.checkout_id, { subscriber: '0x7777777777777777777777777777777777777777', onchainId: '7' });
    const sub = await runSubscriptionFlow(baseUrl, key, subscriptionId, subscriberEmail);
    expect(sub).toMatchObject({
      retrievedStatus: 'active',
      retrievedEmail: subscriberEmail,
      listedIds: [subscriptionId],
      invoiceCount: 1,
      canceledStatus: 'canceled',
      canceledBy: 'merchant',
      refusedStatus: 409,
      refusedCode: 'subscription_not_active',
      missingCode: 'resource_missing',
      badFilterStatus: 400,
    });
  }, 120_000);
});
