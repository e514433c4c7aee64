// The hosted payment page, served by the API process at /pay/<invoice reference> and
// /pay/<payment link id> (the default PAYMENT_PAGE_BASE points here). Public: the unguessable
// reference or link id is the access, as for any payment link. HTML, not the JSON envelope.
//
// In the sandbox a "Simulate payment" button (a plain form POST, no script) pays through
// exactly the path of the test helpers (sandbox-payments.ts), then redirects back to the page
// (POST/redirect/GET), which shows the new state.
//
// "Pay with wallet" (docs/payment-page-and-documents.md): the page loads one script of its own,
// /pay/assets/pay.<hash>.js (immutable), which pays the instructions of GET /pay/<reference>/status
// (JSON, public: amounts, the payments' hashes and confirmations, nothing personal) and follows that
// status to "paid". On a payment link it first makes a checkout (POST /pay/<link id>/checkout):
// an invoice of the link for the chosen amount, with its own reference.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { Type } from 'typebox';
import { appliedPaymentsOfInvoice, findInvoiceByReference, findLinkForPage, findLinkPayment, type PageLink } from '../../db/payment-page.js';
import { paymentsOfInvoice } from '../../db/payments.js';
import { withSnapshot } from '../../db/pool.js';
import { presentPayment } from '../../chain/payment-object.js';
import { chainById, walletChain } from '../../domain/chains.js';
import { negotiateLocale } from '../../domain/locale.js';
import { instructionsOfRow, remainingAtomic } from '../../domain/payments.js';
import { resolveToken } from '../../domain/tokens.js';
import { ApiError, errorEnvelope, notFound } from '../../errors.js';
import { PAYMENT_PAGE_CSP, renderInvoicePage, renderLinkPage, renderNoticePage, renderNotFoundPage, type PageNotice, type SubscriptionBlock } from '../../page/render-payment-page.js';
import { walletScript } from '../../page/wallet-script.js';
import {
  LinkCheckoutBody,
  LinkPaymentBody,
  PaymentPageStatus,
  SubscriptionCheckoutAnswer,
  SubscriptionCheckoutBody,
  SubscriptionCheckoutStatus,
} from '../schemas/index.js';
import { findSubscriptionCheckoutState } from '../../db/subscription-checkouts.js';
import { feeAtomic } from '../../domain/money.js';
import { SUBSCRIPTION_ALLOWANCE_PERIODS, subscriptionAllowanceAtomic } from '../../domain/subscription-checkout.js';
import { createSubscriptionCheckout, subscriptionRefusal } from '../../invoicing/subscription-checkout.js';
import { createLinkCheckout, linkPayableOnChain } from '../../invoicing/link-checkout.js';
import { refusalAsApiError } from '../route-helpers.js';
import { validationError } from '../validation-message.js';
import type { Api, AppDeps } from '../types.js';
import { payInvoice, recordLinkPayment } from '../../invoicing/sandbox-payments.js';

export const PAYMENT_PAGE_PREFIX = '/pay';

/** Invoice references are base62; link ids `plink_` + base62. Anything else is not a page. */
const PAGE_ID = /^[0-9A-Za-z_]{1,64}$/;
const isLinkId = (id: string) => id.startsWith('plink_');

type Params = { id: string };
type Query = { paid?: string };

function sendHtml(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply
    .status(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('content-security-policy', PAYMENT_PAGE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    // The status changes (paid, void): never serve a stale page.
    .header('cache-control', 'no-store')
    .send(html);
}

export const isPaymentPagePath = (url: string | undefined) => (url ?? '').startsWith(`${PAYMENT_PAGE_PREFIX}/`);

/** The HTML 404 of the pages, also for addresses the router could not even parse. */
export function sendPageNotFound(reply: FastifyReply, acceptLanguage: string | undefined): FastifyReply {
  return sendHtml(reply, 404, renderNotFoundPage(negotiateLocale(acceptLanguage) ?? 'en'));
}

const simulatePath = (id: string) => `${PAYMENT_PAGE_PREFIX}/${encodeURIComponent(id)}/simulate`;
const pagePath = (id: string) => `${PAYMENT_PAGE_PREFIX}/${encodeURIComponent(id)}`;
const statusPath = (id: string) => `${PAYMENT_PAGE_PREFIX}/${encodeURIComponent(id)}/status`;
const checkoutPath = (id: string) => `${PAYMENT_PAGE_PREFIX}/${encodeURIComponent(id)}/checkout`;
const subscribePath = (id: string) => `${PAYMENT_PAGE_PREFIX}/${encodeURIComponent(id)}/subscribe`;
const subscribeStatusPath = (linkId: string, checkoutId: string) => `${subscribePath(linkId)}/${encodeURIComponent(checkoutId)}/status`;
const ASSETS_PATH = `${PAYMENT_PAGE_PREFIX}/assets`;
/** The script's name carries its hash: a new build is a new address, so it may be cached for good. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The simulate form's body: two short fields; a longer body is 413. */
const FORM_BODY_LIMIT_BYTES = 4096;

const NOTICE_BY_STATUS: Partial<Record<number, PageNotice>> = { 403: 'page.forbidden', 404: 'page.notFound', 429: 'page.tooManyRequests' };

/** The 4xx of a request refused for what it is (input, media type, size, rate); null for a failure of ours. */
function refusalStatus(err: FastifyError): number | null {
  if (err instanceof ApiError) return err.status < 500 ? err.status : null;
  return err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : null;
}

export async function paymentPageRoutes(app: Api, deps: AppDeps): Promise<void> {
  const { pool, config } = deps;
  const ownOrigin = new URL(config.paymentPageBase).origin;
  /**
   * The simulate form is posted by its own page only. A browser says where a form comes from
   * (Sec-Fetch-Site, Origin); a request without either (curl, an old browser) is let through,
   * since the form is a sandbox convenience with no secret to steal, only a payment to forge.
   */
  const isCrossSite = (req: FastifyRequest): boolean => {
    const site = req.headers['sec-fetch-site'];
    if (site === 'cross-site') return true;
    const origin = req.headers.origin;
    // The page's no-referrer policy makes a browser send `Origin: null` for its own form; its
    // Sec-Fetch-Site then says same-origin.
    if (origin === 'null' && site === 'same-origin') return false;
    if (origin === undefined) return false;
    return origin !== ownOrigin && origin !== `${req.protocol}://${req.host}`;
  };
  /**
   * A checkout is made by the link page's own script only (fetch, which every browser sends with
   * Origin and, today, Sec-Fetch-Site), so unlike the simulate form it must prove it: a request
   * saying neither (a script, curl) is refused like a cross-site one. Headers can be forged
   * outside a browser; the checkout limits bound what such a caller can make.
   */
  const isSameOrigin = (req: FastifyRequest): boolean => {
    const site = req.headers['sec-fetch-site'];
    if (site !== undefined) return site === 'same-origin';
    const origin = req.headers.origin;
    return origin !== undefined && (origin === ownOrigin || origin === `${req.protocol}://${req.host}`);
  };
  const pageUrl = (id: string) => `${config.paymentPageBase}/${id}`;
  const visitorLocale = (req: FastifyRequest) => negotiateLocale(req.headers['accept-language']) ?? 'en';

  await app.register(async (pages) => {
    // Pages are HTML for people, not part of the v1 API: left out of the OpenAPI document (hide).
    // The simulate form posts application/x-www-form-urlencoded; nothing else is accepted here.
    // Fields trimmed, blank ones dropped (an empty optional input is "not given", not "").
    pages.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT_BYTES }, (_req, body, done) => {
      const fields: Record<string, string> = {};
      for (const [name, value] of new URLSearchParams(typeof body === 'string' ? body : body.toString('utf8'))) {
        if (value.trim() !== '') fields[name] = value.trim();
      }
      done(null, fields);
    });
    // Per client address, with the API's budget (RATE_LIMIT_MAX per RATE_LIMIT_WINDOW_MS): the
    // pages are public, so the address is all there is to count by.
    await pages.register(rateLimit, {
      max: config.rateLimitMax,
      timeWindow: config.rateLimitWindowMs,
      keyGenerator: (req) => req.ip,
      errorResponseBuilder: () => new ApiError('rate_limited', 'Too many requests from this address.'),
    });
    // A refused request (bad input, a foreign form, too many requests) is the visitor's: its own
    // 4xx as a page, logged below error level. Only what is left is a 500 with a stack.
    pages.setErrorHandler((err: FastifyError, req, reply) => {
      const status = refusalStatus(err);
      if (status === null) {
        req.log.error({ err }, 'payment page failed');
        return sendHtml(reply, 500, renderNoticePage(visitorLocale(req), 'page.unavailable'));
      }
      req.log.info({ status, code: err.code, reason: err.message }, 'payment page refused the request');
      return sendHtml(reply, status, renderNoticePage(visitorLocale(req), NOTICE_BY_STATUS[status] ?? 'page.badRequest'));
    });

    async function invoicePage(reference: string, error: string | null): Promise<{ status: number; html: string }> {
      // The balance and the payments that make it up, as of one instant.
      const { inv, applied } = await withSnapshot(pool, async (db) => {
        const found = await findInvoiceByReference(db, reference);
        return { inv: found, applied: found ? await appliedPaymentsOfInvoice(db, found.id) : [] };
      });
      // A draft has no page yet: its link has not been sent to anyone.
      if (!inv || inv.status === 'draft' || inv.amount === null || inv.amount_atomic === null) {
        return { status: 404, html: renderNotFoundPage('en') };
      }
      const html = await renderInvoicePage({
        locale: inv.customer_locale,
        testMode: inv.environment === 'sandbox',
        merchantName: inv.merchant_name,
        code: inv.code ?? inv.reference,
        status: inv.status,
        amount: inv.amount,
        amountAtomic: inv.amount_atomic,
        currency: inv.currency,
        network: inv.network,
        chainId: inv.chain_id,
        tokenAddress: inv.token_address,
        tokenDecimals: inv.token_decimals,
        dueAt: inv.due_at,
        paidAt: inv.paid_at,
        timeZone: inv.time_zone,
        settlementAddress: inv.settlement_address,
        paymentReference: inv.payment_reference,
        paidAtomic: inv.amount_paid_atomic,
        explorerUrl: chainById(deps.config.chains, inv.chain_id)?.explorerUrl ?? null,
        payments: applied.map((p) => ({
          countedAtomic: p.counted_atomic,
          txHash: p.tx_hash,
        })),
        pageUrl: pageUrl(inv.reference),
        simulateAction: inv.environment === 'sandbox' ? simulatePath(inv.reference) : null,
        wallet: instructionsOfRow(inv, deps.config.chains)
          ? { scriptSrc: `${ASSETS_PATH}/${(await walletScript()).name}`, statusUrl: statusPath(inv.reference), checkoutUrl: null }
          : null,
        error,
      });
      return { status: error ? 400 : 200, html };
    }

    async function linkPage(linkId: string, locale: string, paymentId: string | null, error: string | null): Promise<{ status: number; html: string }> {
      const link = await findLinkForPage(pool, linkId);
      if (!link) return { status: 404, html: renderNotFoundPage(locale) };
      const token = resolveToken(deps.config.chains, link.environment, link.network, link.currency);
      const paid = paymentId ? await findLinkPayment(pool, link.id, paymentId) : null;
      const html = await renderLinkPage({
        locale,
        testMode: link.environment === 'sandbox',
        merchantName: link.merchant_name,
        name: link.name,
        currency: link.currency,
        network: link.network,
        chainId: link.chain_id,
        tokenAddress: token.ok ? token.token.address : '',
        tokenDecimals: link.token_decimals,
        priceAmount: link.type === 'fixed_price' ? link.price_amount : null,
        minAmount: link.min_amount,
        maxAmount: link.max_amount,
        presetAmount: link.preset_amount,
        active: link.status === 'active',
        exhausted: link.max_payments !== null && link.payments >= link.max_payments,
        collectEmail: link.collect_email,
        paidAmount: paid?.amount ?? null,
        confirmationMessage: link.confirmation_message,
        redirectUrl: link.redirect_url,
        subscription: await subscriptionBlock(link),
        pageUrl: pageUrl(link.id),
        simulateAction: link.environment === 'sandbox' ? simulatePath(link.id) : null,
        // The wallet pays a checkout (an invoice of the link), which needs an on-chain target.
        wallet: linkPayableOnChain(deps.config.chains, link.chain_id, link.settlement_address)
          ? {
              scriptSrc: `${ASSETS_PATH}/${(await walletScript()).name}`,
              statusUrl: null,
              checkoutUrl: checkoutPath(link.id),
              confirmationMessage: link.confirmation_message,
              redirectUrl: link.after_completion === 'redirect' ? link.redirect_url : null,
            }
          : null,
        error,
      });
      return { status: error ? 400 : 200, html };
    }

    /** A recurring price's link: its terms as the page shows them, and whether a subscription can start now. */
    async function subscriptionBlock(link: PageLink): Promise<SubscriptionBlock | null> {
      if (link.type !== 'fixed_price' || link.price_cadence === null || link.price_cadence === 'one_time' || link.price_interval_seconds === null) return null;
      const available = subscriptionRefusal(config.chains, link.chain_id, link.settlement_address, link.platform_fee_bps, deps.operatorAddress ?? (() => null)) === null;
      return {
        cadence: link.price_cadence,
        intervalSeconds: link.price_interval_seconds,
        amountAtomic: link.price_amount_atomic ?? '0',
        feeBps: link.platform_fee_bps,
        contractAddress: chainById(config.chains, link.chain_id)?.subscriptionManager ?? null,
        allowanceAtomic: subscriptionAllowanceAtomic(BigInt(link.price_amount_atomic ?? '0')).toString(),
        allowancePeriods: SUBSCRIPTION_ALLOWANCE_PERIODS,
        available,
        onSale: link.price_on_sale === true,
        scriptSrc: available ? `${ASSETS_PATH}/${(await walletScript()).name}` : null,
        subscribeUrl: subscribePath(link.id),
      };
    }

    // The wallet script: only under its current hashed name; any other name is a 404.
    pages.get<{ Params: { name: string } }>('/assets/:name', { schema: { hide: true } }, async (req, reply) => {
      const script = await walletScript();
      if (req.params.name !== script.name) return sendHtml(reply, 404, renderNotFoundPage(visitorLocale(req)));
      return reply
        .header('content-type', 'text/javascript; charset=utf-8')
        .header('cache-control', IMMUTABLE)
        .header('x-content-type-options', 'nosniff')
        .header('cross-origin-resource-policy', 'same-origin')
        .send(script.body);
    });

    // JSON for the wallet script: errors in the API's envelope, not as pages.
    await pages.register(async (json) => {
      json.setErrorHandler((err: FastifyError, req, reply) => {
        const status = refusalStatus(err);
        if (status === null) {
          req.log.error({ err }, 'payment status failed');
          return reply.status(500).header('cache-control', 'no-store').send(errorEnvelope(new ApiError('internal_error', 'Something went wrong on our side.')));
        }
        const apiErr = err instanceof ApiError ? err : new ApiError(status === 429 ? 'rate_limited' : 'validation_failed', err.message);
        return reply.status(status).header('cache-control', 'no-store').send(errorEnvelope(apiErr));
      });

      /**
       * What the payer's page needs to pay and to follow its payment: public facts only (the
       * status, amounts, the instructions printed on the page, the payments' hashes and
       * confirmations), never a name, an email or an id of the service.
       */
      json.get<{ Params: Params; Reply: PaymentPageStatus }>('/:id/status', { schema: { hide: true, response: { 200: PaymentPageStatus } } }, async (req, reply) => {
        const { id } = req.params;
        // One snapshot: a payment seen confirmed comes with the balance it made (the script trusts both).
        const { inv, payments } = PAGE_ID.test(id) && !isLinkId(id)
          ? await withSnapshot(pool, async (db) => {
              const found = await findInvoiceByReference(db, id);
              return { inv: found, payments: found ? await paymentsOfInvoice(db, found.id) : [] };
            })
          : { inv: null, payments: [] };
        if (!inv || inv.status === 'draft' || inv.amount_atomic === null) throw notFound('payment page', id);
        const chain = chainById(deps.config.chains, inv.chain_id);
        reply.header('cache-control', 'no-store');
        return {
          status: inv.status,
          currency: inv.currency,
          amount_atomic: inv.amount_atomic,
          amount_paid_atomic: inv.amount_paid_atomic,
          amount_remaining_atomic: remainingAtomic({ amountAtomic: BigInt(inv.amount_atomic), paidAtomic: BigInt(inv.amount_paid_atomic) }).toString(),
          required_confirmations: chain?.confirmations ?? 0,
          payments: payments.map((p) => {
            const o = presentPayment(p, deps.config.chains);
            return { tx_hash: o.tx_hash, status: o.status, confirmations: o.confirmations, explorer_url: o.explorer_url };
          }),
          instructions: instructionsOfRow(inv, deps.config.chains),
          chain: chain ? walletChain(chain) : null,
        };
      });
      /**
       * A payment link's checkout for the wallet: an invoice of the link for the chosen amount,
       * issued at once but emailed to nobody (its receipt goes to the given email once paid),
       * answered with what the script needs to pay it as any invoice, and its page. Posted by the
       * link's own page only.
       */
      json.post<{ Params: Params; Body: LinkCheckoutBody }>(
        '/:id/checkout',
        { schema: { hide: true, body: LinkCheckoutBody }, attachValidation: true },
        async (req, reply) => {
          const { id } = req.params;
          if (isCrossSite(req) || !isSameOrigin(req)) {
            req.log.info({ origin: req.headers.origin, fetchSite: req.headers['sec-fetch-site'] }, 'payment page refused a checkout not from its own page');
            throw new ApiError('permission_denied', 'A checkout is made from the payment link\'s own page.');
          }
          const link = PAGE_ID.test(id) && isLinkId(id) ? await findLinkForPage(pool, id) : null;
          if (!link) throw notFound('payment link', id);
          if (req.validationError) throw validationError(req.validationError.validation ?? [], 'body');
          // No email goes out now (the address was typed by an anonymous visitor): the receipt
          // goes to it once the checkout is paid.
          const { invoice } = await refusalAsApiError(createLinkCheckout(
            pool,
            config,
            { accountId: link.account_id, environment: link.environment },
            link.id,
            { amount: req.body.amount, customerEmail: req.body.customer_email, locale: visitorLocale(req) },
          ));
          const inv = await findInvoiceByReference(pool, invoice.reference);
          reply.header('cache-control', 'no-store');
          return {
            reference: invoice.reference,
            status_url: statusPath(invoice.reference),
            page_url: pageUrl(invoice.reference),
            instructions: inv ? instructionsOfRow(inv, deps.config.chains) : null,
          };
        },
      );

      /**
       * A subscription checkout for the link page's "Subscribe with wallet": the first period's
       * invoice and the exact terms (src/invoicing/subscription-checkout.ts), answered with what
       * the script passes to approve and subscribe(terms). Posted by the link's own page only, as
       * a checkout; the checkout's id in the answer is the page's handle to follow it.
       */
      json.post<{ Params: Params; Body: SubscriptionCheckoutBody; Reply: SubscriptionCheckoutAnswer }>(
        '/:id/subscribe',
        { schema: { hide: true, body: SubscriptionCheckoutBody, response: { 200: SubscriptionCheckoutAnswer } }, attachValidation: true },
        async (req, reply) => {
          const { id } = req.params;
          if (isCrossSite(req) || !isSameOrigin(req)) {
            req.log.info({ origin: req.headers.origin, fetchSite: req.headers['sec-fetch-site'] }, 'payment page refused a subscription checkout not from its own page');
            throw new ApiError('permission_denied', 'A subscription is started from the payment link\'s own page.');
          }
          const link = PAGE_ID.test(id) && isLinkId(id) ? await findLinkForPage(pool, id) : null;
          if (!link) throw notFound('payment link', id);
          if (req.validationError) throw validationError(req.validationError.validation ?? [], 'body');
          const { checkout, invoice } = await refusalAsApiError(createSubscriptionCheckout(
            pool,
            config,
            deps.operatorAddress ?? (() => null),
            { accountId: link.account_id, environment: link.environment },
            link.id,
            { customerEmail: req.body.customer_email, locale: visitorLocale(req) },
          ));
          const chain = chainById(config.chains, checkout.chain_id);
          const amount = BigInt(checkout.amount_atomic);
          reply.header('cache-control', 'no-store');
          return {
            checkout_id: checkout.id,
            status_url: subscribeStatusPath(link.id, checkout.id),
            invoice_page_url: pageUrl(invoice.reference),
            chain_id: checkout.chain_id,
            network: invoice.network,
            currency: invoice.currency,
            token_decimals: invoice.token_decimals,
            contract_address: checkout.contract_address,
            terms: {
              payee: checkout.payee_address,
              token: checkout.token_address,
              amount: checkout.amount_atomic,
              period: checkout.period_seconds,
              fee_bps: checkout.fee_bps,
              fee_address: checkout.fee_address,
              operator: checkout.operator_address,
              ends_at: checkout.ends_at === null ? 0 : Math.floor(checkout.ends_at.getTime() / 1000),
              checkout_reference: checkout.checkout_reference,
            },
            allowance_atomic: subscriptionAllowanceAtomic(amount).toString(),
            fee_atomic: feeAtomic(checkout.amount_atomic, checkout.fee_bps),
            chain: chain ? walletChain(chain) : null,
          };
        },
      );

      /** A subscription checkout's progress, for its page: pending until the watcher made the subscription. */
      json.get<{ Params: Params & { checkoutId: string }; Reply: SubscriptionCheckoutStatus }>(
        '/:id/subscribe/:checkoutId/status',
        { schema: { hide: true, response: { 200: SubscriptionCheckoutStatus } } },
        async (req, reply) => {
          const { id, checkoutId } = req.params;
          const { state, payments } = PAGE_ID.test(id) && isLinkId(id) && PAGE_ID.test(checkoutId)
            ? await withSnapshot(pool, async (db) => {
                const found = await findSubscriptionCheckoutState(db, id, checkoutId);
                return { state: found, payments: found ? await paymentsOfInvoice(db, found.invoice_id) : [] };
              })
            : { state: null, payments: [] };
          if (!state) throw notFound('subscription checkout', checkoutId);
          reply.header('cache-control', 'no-store');
          return {
            status: state.subscription_id !== null ? 'subscribed' : state.invoice_status === 'void' ? 'expired' : 'pending',
            invoice_status: state.invoice_status,
            required_confirmations: chainById(config.chains, state.chain_id)?.confirmations ?? 0,
            payments: payments.map((p) => {
              const o = presentPayment(p, config.chains);
              return { tx_hash: o.tx_hash, status: o.status, confirmations: o.confirmations };
            }),
          };
        },
      );
    });

    pages.get<{ Params: Params; Querystring: Query }>('/:id', { schema: { hide: true } }, async (req, reply) => {
      const { id } = req.params;
      if (!PAGE_ID.test(id)) return sendHtml(reply, 404, renderNotFoundPage(visitorLocale(req)));
      const paid = typeof req.query.paid === 'string' && PAGE_ID.test(req.query.paid) ? req.query.paid : null;
      const page = isLinkId(id) ? await linkPage(id, visitorLocale(req), paid, null) : await invoicePage(id, null);
      return sendHtml(reply, page.status, page.html);
    });

    pages.post<{ Params: Params; Body: LinkPaymentBody | null | undefined }>(
      '/:id/simulate',
      // The form is checked against the test helper's own body schema (amount, an email of at
      // most 254 characters); a refusal is shown on the page, not as a bare error.
      { schema: { hide: true, body: Type.Union([LinkPaymentBody, Type.Null()]) }, attachValidation: true },
      async (req, reply) => {
        const { id } = req.params;
        if (isCrossSite(req)) {
          req.log.info({ origin: req.headers.origin, fetchSite: req.headers['sec-fetch-site'] }, 'payment page refused a cross-site form');
          return sendHtml(reply, 403, renderNoticePage(visitorLocale(req), 'page.forbidden'));
        }
        if (!PAGE_ID.test(id)) return sendHtml(reply, 404, renderNotFoundPage(visitorLocale(req)));
        const invalid = req.validationError ? validationError(req.validationError.validation ?? [], 'body') : null;
        const form = req.body ?? {};
        if (isLinkId(id)) {
          const link = await findLinkForPage(pool, id);
          if (!link || link.environment !== 'sandbox') return sendHtml(reply, 404, renderNotFoundPage(visitorLocale(req)));
          try {
            if (invalid) throw invalid;
            const payment = await refusalAsApiError(recordLinkPayment(pool, { accountId: link.account_id, environment: link.environment }, link.id, {
              amount: form.amount,
              customer_email: form.customer_email,
            }));
            return reply.redirect(`${pagePath(id)}?paid=${encodeURIComponent(payment.id)}`, 303);
          } catch (err) {
            if (!(err instanceof ApiError)) throw err;
            const page = await linkPage(id, visitorLocale(req), null, err.message);
            return sendHtml(reply, page.status, page.html);
          }
        }
        const inv = await findInvoiceByReference(pool, id);
        if (!inv || inv.environment !== 'sandbox' || inv.status === 'draft') return sendHtml(reply, 404, renderNotFoundPage(visitorLocale(req)));
        // Paid already (a second click): nothing to do, show the page.
        if (inv.status !== 'paid') {
          try {
            if (invalid) throw invalid;
            await refusalAsApiError(payInvoice(deps, { accountId: inv.account_id, environment: inv.environment }, inv.id, req.log));
          } catch (err) {
            if (!(err instanceof ApiError)) throw err;
            const page = await invoicePage(id, err.message);
            return sendHtml(reply, page.status, page.html);
          }
        }
        return reply.redirect(pagePath(id), 303);
      },
    );
  }, { prefix: PAYMENT_PAGE_PREFIX });
}
