// Schemas of the account and the on-chain payments (docs/payments.md), written with TypeBox as
// the others are: Fastify validates and serialises with them, the OpenAPI document publishes them.
import { Type, type Static } from 'typebox';
import { ENVIRONMENTS } from '../../domain/environment.js';
import { PAYMENT_KINDS } from '../../chain/kinds/index.js';
import { PAYMENT_OUTCOMES, PAYMENT_STATUSES } from '../../domain/payments.js';
import { Address, ATOMIC_AMOUNT_PATTERN, literals, Nullable } from './parts.js';
import { PageQueryFields } from './common.js';

const Atomic = Type.String({ pattern: ATOMIC_AMOUNT_PATTERN, description: 'integer string, atomic units of the token' });

export const Account = Type.Object({
  id: Type.String(),
  object: Type.Literal('account'),
  name: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  environment: literals(ENVIRONMENTS),
  time_zone: Type.String(),
  platform_fee_bps: Type.Integer(),
  settlement_address: Type.Union([Address, Type.Null()], { description: 'where payments of invoices sent from now on go (EIP-55); per environment' }),
});
export type AccountObject = Static<typeof Account>;

export const UpdateAccountBody = Type.Object(
  {
    settlement_address: Type.String({ minLength: 1, maxLength: 100, description: 'an EVM address, EIP-55 checksummed or all lower case' }),
  },
  { additionalProperties: false },
);

export const PaymentIdParams = Type.Object({ paymentId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

export const Payment = Type.Object({
  id: Type.String(),
  object: Type.Literal('payment'),
  invoice_id: Type.Union([Type.String(), Type.Null()]),
  chain_id: Type.Integer(),
  network: Type.String(),
  tx_hash: Type.String(),
  log_index: Type.Integer(),
  block_number: Type.Integer(),
  block_hash: Type.String(),
  token_address: Address,
  from: Type.Union([Address, Type.Null()]),
  to: Address,
  amount_atomic: Atomic,
  fee_atomic: Atomic,
  total_atomic: Atomic,
  fee_address: Type.Union([Address, Type.Null()]),
  fee_expected_atomic: Nullable(Atomic),
  fee_collected: Type.Boolean(),
  received_atomic: Atomic,
  counted_atomic: Nullable(Atomic),
  reorged_out: Type.Boolean(),
  payment_reference: Type.Union([Type.String(), Type.Null()]),
  kind: literals(PAYMENT_KINDS),
  status: literals(PAYMENT_STATUSES),
  outcome: Type.Union([literals(PAYMENT_OUTCOMES), Type.Null()]),
  confirmations: Type.Integer({ minimum: 0, description: "Blocks built on top of the payment's block, from the chain head the service last saw: it is confirmed once they reach its chain's confirmations" }),
  explorer_url: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  confirmed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

export const ListPaymentsQuery = Type.Object(
  {
    ...PageQueryFields,
    unmatched: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'true: only confirmed payments no invoice claims' })),
    invoice_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    status: Type.Optional(literals(PAYMENT_STATUSES)),
  },
  { additionalProperties: false },
);

export const ApplyPaymentBody = Type.Object({ invoice_id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
