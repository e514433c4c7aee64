// The kinds of chain log the payment detector reads, in the order they observe a range: a kind
// that takes Transfer legs comes before the transfer kind, which takes what is left. A new kind is
// a module (kind.ts says what it declares) and one line here. Kinds whose logs are no payments (a
// subscription canceled) are listed apart: read and recorded like the others, never a payment's kind.
import type { LogOf, PaymentLogKind } from './kind.js';
import { cancelKind } from './cancel.js';
import { chargeKind } from './charge.js';
import { proxyKind } from './proxy.js';
import { subscribeKind } from './subscribe.js';
import { transferKind } from './transfer.js';

export const PAYMENT_LOG_KINDS = [proxyKind, subscribeKind, chargeKind, transferKind] as const;
const RECORD_LOG_KINDS = [cancelKind] as const;

/** The kinds as the detector and the watcher use them: by what every kind declares, never by name. */
export const KINDS: readonly PaymentLogKind[] = [...PAYMENT_LOG_KINDS, ...RECORD_LOG_KINDS];

/** A range's logs, by the name of their kind (a kind absent had none). */
export type LogsByKind = { [K in (typeof PAYMENT_LOG_KINDS)[number] | (typeof RECORD_LOG_KINDS)[number] as K['name']]?: readonly LogOf<K>[] };

/** The names of the kinds that make payments: a payment's `kind` (the API's enum). */
export type PaymentKind = (typeof PAYMENT_LOG_KINDS)[number]['name'];
export const PAYMENT_KINDS = PAYMENT_LOG_KINDS.map((k) => k.name) as readonly PaymentKind[] as readonly [PaymentKind, ...PaymentKind[]];

const byName = new Map<string, PaymentLogKind>(KINDS.map((k) => [k.name, k]));

/** The kind of a payment (a row's or an observation's `kind`), or of a record. */
export function kindNamed(name: string): PaymentLogKind {
  const kind = byName.get(name);
  if (!kind) throw new Error(`no kind of chain log is named ${name}`);
  return kind;
}
