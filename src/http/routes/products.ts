import { emitEvent } from '../../db/events.js';
import { withTransaction } from '../../db/pool.js';
import { deleteProductIfUnused, findProduct, insertPrice, insertProduct, listProducts, updateProduct, type NewPrice } from '../../db/products.js';
import { resolveCadence } from '../../domain/cadence.js';
import type { Environment } from '../../domain/environment.js';
import { newId } from '../../domain/ids.js';
import { formatDecimal, parseAmount, toAtomic } from '../../domain/money.js';
import type { ChainRegistry } from '../../domain/chains.js';
import { resolveToken } from '../../domain/tokens.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { presentProduct } from '../presenters.js';
import { coerceLimit, listBody, pageRequest } from '../pagination.js';
import { CreateProductBody, Data, DeletedObject, ErrorEnvelope, ListOf, PageQuery, Product, ProductIdParams, UpdateProductBody, type CreatePriceBody } from '../schemas/index.js';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

/** Checks one price of a create request against the token registry and the cadence rules. */
function priceFromInput(chains: ChainRegistry, environment: Environment, productId: string, p: CreatePriceBody, i: number): NewPrice {
  const token = resolveToken(chains, environment, p.network, p.currency);
  if (!token.ok) throw new ApiError(token.code, token.message, `prices[${i}]`);
  const amount = parseAmount(p.amount, token.token.decimals, `prices[${i}].amount`);
  if (!amount.ok) throw new ApiError(amount.code, amount.message, `prices[${i}].amount`);
  const cadence = resolveCadence(p.cadence, p.interval_seconds, environment);
  if (!cadence.ok) throw new ApiError(cadence.code, cadence.message, cadence.code === 'validation_failed' ? `prices[${i}].interval_seconds` : `prices[${i}]`);
  return {
    id: newId('price'),
    productId,
    amount: formatDecimal(amount.value),
    amountAtomic: toAtomic(amount.value, token.token.decimals),
    currency: token.token.currency,
    network: token.token.network,
    chainId: token.token.chainId,
    tokenAddress: token.token.address,
    tokenDecimals: token.token.decimals,
    cadence: cadence.cadence,
    intervalSeconds: cadence.intervalSeconds,
    metadata: p.metadata ?? {},
  };
}

export async function productRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool } = deps;

  app.post(
    '/products',
    { schema: { tags: ['products'], summary: 'Create a product with its prices', body: CreateProductBody, response: { 200: Data(Product), ...errorResponses } } },
    async (req) => {
      const id = newId('prod');
      const prices = (req.body.prices ?? []).map((p, i) => priceFromInput(deps.config.chains, req.auth.environment, id, p, i));
      const product = await withTransaction(pool, async (tx) => {
        await insertProduct(tx, { id, scope: req.auth, name: req.body.name, description: req.body.description ?? null, metadata: req.body.metadata ?? {} });
        for (const price of prices) await insertPrice(tx, req.auth, price);
        const created = presentProduct((await findProduct(tx, req.auth, id))!);
        await emitEvent(tx, req.auth, 'product.created', 'product', id, created);
        return created;
      });
      return { data: product };
    },
  );

  app.get(
    '/products/:productId',
    { schema: { tags: ['products'], summary: 'Retrieve a product with its prices', params: ProductIdParams, response: { 200: Data(Product), ...errorResponses } } },
    async (req) => {
      const product = await findProduct(pool, req.auth, req.params.productId);
      if (!product) throw notFound('product', req.params.productId);
      return { data: presentProduct(product) };
    },
  );

  app.patch(
    '/products/:productId',
    {
      schema: {
        tags: ['products'],
        summary: 'Update a product (inactive: no new subscriptions; running ones untouched)',
        params: ProductIdParams,
        body: UpdateProductBody,
        response: { 200: Data(Product), ...errorResponses },
      },
    },
    async (req) => {
      const product = await withTransaction(pool, async (tx) => {
        const found = await updateProduct(tx, req.auth, req.params.productId, req.body);
        if (!found) throw notFound('product', req.params.productId);
        const updated = presentProduct((await findProduct(tx, req.auth, req.params.productId))!);
        await emitEvent(tx, req.auth, 'product.updated', 'product', updated.id, updated);
        return updated;
      });
      return { data: product };
    },
  );

  app.get(
    '/products',
    {
      preValidation: coerceLimit,
      schema: {
        tags: ['products'],
        summary: 'List products with their prices, newest first, a page at a time',
        querystring: PageQuery,
        response: { 200: ListOf(Product), ...errorResponses },
      },
    },
    async (req) => listBody(await listProducts(pool, req.auth, pageRequest(req.query)), 'product', presentProduct),
  );

  app.delete(
    '/products/:productId',
    {
      schema: {
        tags: ['products'],
        summary: 'Delete a product and its prices while it is deletable (no price used by a subscription or a payment link)',
        params: ProductIdParams,
        response: { 200: Data(DeletedObject), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      const outcome = await withTransaction(pool, (tx) => deleteProductIfUnused(tx, req.auth, req.params.productId));
      if (outcome === 'missing') throw notFound('product', req.params.productId);
      if (outcome === 'not_deletable') {
        throw new ApiError(
          'product_not_deletable',
          'A price of this product is used by a subscription or a payment link, so it cannot be deleted; set active to false to retire it.',
        );
      }
      return { data: { id: req.params.productId, deleted: true } };
    },
  );
}
