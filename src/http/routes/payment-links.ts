import type { Decimal } from 'decimal.js';
import { deleteLinkWithoutPayments, findLink, insertLink, listLinks, updateLink, type PaymentLinkRow } from '../../db/payment-links.js';
import { emitEvent } from '../../db/events.js';
import type { Scope } from '../../db/invoices.js';
import { withTransaction, type PoolClient } from '../../db/pool.js';
import { findPriceForUse } from '../../db/products.js';
import { newId } from '../../domain/ids.js';
import { formatDecimal, parseAmount } from '../../domain/money.js';
import { resolveToken } from '../../domain/tokens.js';
import { ApiError, notFound } from '../../errors.js';
import type { AppDeps } from '../types.js';
import { presentLink } from '../presenters.js';
import { CreatePaymentLinkBody, Data, DeletedObject, ErrorEnvelope, PaymentLinkIdParams, PaymentLink, UpdatePaymentLinkBody } from '../schemas/index.js';
import { Type } from 'typebox';
import type { Api } from '../types.js';
import { errorResponses } from '../route-helpers.js';

function invalid(message: string, param?: string): ApiError {
  return new ApiError('payment_link_invalid', message, param);
}

function decimalOrThrow(raw: string | undefined, decimals: number, field: string): Decimal | null {
  if (raw === undefined) return null;
  const parsed = parseAmount(raw, decimals, field);
  if (!parsed.ok) throw new ApiError(parsed.code, parsed.message, field);
  return parsed.value;
}

export async function paymentLinkRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool, config } = deps;
  const present = (l: PaymentLinkRow) => presentLink(l, config);
  /** The link as presented, recorded as an event of this kind in the same transaction. */
  const recorded = async (tx: PoolClient, auth: Scope, type: 'payment_link.created' | 'payment_link.updated' | 'payment_link.deleted', l: PaymentLinkRow) => {
    const object = present(l);
    await emitEvent(tx, auth, type, 'payment_link', l.id, object);
    return object;
  };

  app.post(
    '/payment-links',
    { schema: { tags: ['payment links'], summary: 'Create a payment link', body: CreatePaymentLinkBody, response: { 200: Data(PaymentLink), ...errorResponses } } },
    async (req) => {
      const b = req.body;
      const type = b.type ?? (b.price_id ? 'fixed_price' : 'custom_amount');
      const afterCompletion = b.after_completion ?? 'message';
      if (afterCompletion === 'redirect' && !b.redirect_url) {
        throw invalid('after_completion "redirect" needs a redirect_url.', 'redirect_url');
      }
      const common = {
        id: newId('plink'),
        name: b.name,
        type,
        collect_email: b.collect_email ?? false,
        collect_name: b.collect_name ?? false,
        collect_phone: b.collect_phone ?? false,
        collect_address: b.collect_address ?? false,
        max_payments: b.max_payments ?? null,
        after_completion: afterCompletion,
        confirmation_message: b.confirmation_message ?? null,
        redirect_url: b.redirect_url ?? null,
        fee_payer: b.fee_payer ?? 'merchant',
      } as const;

      if (type === 'fixed_price') {
        if (!b.price_id) throw invalid('A fixed_price link needs a price_id.', 'price_id');
        if (b.min_amount !== undefined || b.max_amount !== undefined || b.preset_amount !== undefined) {
          throw invalid('A fixed_price link takes its amount from its price; min_amount, max_amount and preset_amount are for custom_amount links.');
        }
        if (b.currency !== undefined || b.network !== undefined) {
          throw invalid('A fixed_price link takes its currency and network from its price.');
        }
        const row = await withTransaction(pool, async (tx) => {
          const price = await findPriceForUse(tx, req.auth, b.price_id!);
          if (!price) throw new ApiError('price_not_found', `No such price: ${JSON.stringify(b.price_id)}.`, 'price_id');
          if (!price.active) throw new ApiError('price_inactive', 'This price is inactive.', 'price_id');
          if (!price.product_active) throw new ApiError('product_inactive', 'The product of this price is inactive.', 'price_id');
          const link = await insertLink(tx, req.auth, {
            ...common,
            price_id: price.id,
            currency: price.currency,
            network: price.network,
            chain_id: price.chain_id,
            token_decimals: price.token_decimals,
            min_amount: null,
            max_amount: null,
            preset_amount: null,
          });
          return recorded(tx, req.auth, 'payment_link.created', link);
        });
        return { data: row };
      }

      if (b.price_id) throw invalid('A custom_amount link has no price_id.', 'price_id');
      const token = resolveToken(deps.config.chains, req.auth.environment, b.network, b.currency);
      if (!token.ok) throw new ApiError(token.code, token.message);
      const d = token.token.decimals;
      const min = decimalOrThrow(b.min_amount, d, 'min_amount');
      const max = decimalOrThrow(b.max_amount, d, 'max_amount');
      const preset = decimalOrThrow(b.preset_amount, d, 'preset_amount');
      if (min && max && min.gt(max)) throw invalid('min_amount must not exceed max_amount.', 'min_amount');
      if (preset && min && preset.lt(min)) throw invalid('preset_amount must not be below min_amount.', 'preset_amount');
      if (preset && max && preset.gt(max)) throw invalid('preset_amount must not exceed max_amount.', 'preset_amount');
      const row = await withTransaction(pool, async (tx) => {
        const link = await insertLink(tx, req.auth, {
        ...common,
        price_id: null,
        currency: token.token.currency,
        network: token.token.network,
        chain_id: token.token.chainId,
        token_decimals: d,
        min_amount: min && formatDecimal(min),
        max_amount: max && formatDecimal(max),
        preset_amount: preset && formatDecimal(preset),
        });
        return recorded(tx, req.auth, 'payment_link.created', link);
      });
      return { data: row };
    },
  );

  app.get(
    '/payment-links',
    { schema: { tags: ['payment links'], summary: 'List every payment link of the environment', response: { 200: Data(Type.Array(PaymentLink)), ...errorResponses } } },
    async (req) => ({ data: (await listLinks(pool, req.auth)).map(present) }),
  );

  app.get(
    '/payment-links/:paymentLinkId',
    { schema: { tags: ['payment links'], summary: 'Retrieve a payment link', params: PaymentLinkIdParams, response: { 200: Data(PaymentLink), ...errorResponses } } },
    async (req) => {
      const row = await findLink(pool, req.auth, req.params.paymentLinkId);
      if (!row) throw notFound('payment link', req.params.paymentLinkId);
      return { data: present(row) };
    },
  );

  app.patch(
    '/payment-links/:paymentLinkId',
    {
      schema: {
        tags: ['payment links'],
        summary: 'Update a payment link (inactive closes it and keeps its payments)',
        params: PaymentLinkIdParams,
        body: UpdatePaymentLinkBody,
        response: { 200: Data(PaymentLink), ...errorResponses },
      },
    },
    async (req) => {
      const row = await withTransaction(pool, async (tx) => {
        const link = await findLink(tx, req.auth, req.params.paymentLinkId, true);
        if (!link) throw notFound('payment link', req.params.paymentLinkId);
        const after = req.body.after_completion ?? link.after_completion;
        const redirect = req.body.redirect_url ?? link.redirect_url;
        if (after === 'redirect' && !redirect) throw invalid('after_completion "redirect" needs a redirect_url.', 'redirect_url');
        return recorded(tx, req.auth, 'payment_link.updated', await updateLink(tx, link.id, req.body));
      });
      return { data: row };
    },
  );

  app.delete(
    '/payment-links/:paymentLinkId',
    {
      schema: {
        tags: ['payment links'],
        summary: 'Delete a payment link that never took a payment',
        params: PaymentLinkIdParams,
        response: { 200: Data(DeletedObject), ...errorResponses, 409: ErrorEnvelope },
      },
    },
    async (req) => {
      // The row lock first, as a payment takes it: a payment in flight commits before the
      // delete looks for payments (409), or finds the link gone (404). Without it the delete
      // could pass its check, then hit the foreign key of the just-committed payment (a 500).
      await withTransaction(pool, async (tx) => {
        const link = await findLink(tx, req.auth, req.params.paymentLinkId, true);
        if (!link) throw notFound('payment link', req.params.paymentLinkId);
        if (!(await deleteLinkWithoutPayments(tx, req.auth, link.id))) {
          throw new ApiError(
            'payment_link_has_payments',
            'This payment link has taken payments and cannot be deleted; set its status to inactive to close it.',
          );
        }
        await recorded(tx, req.auth, 'payment_link.deleted', link);
      });
      return { data: { id: req.params.paymentLinkId, deleted: true } };
    },
  );
}
