// The building blocks every schema module shares (TypeBox): nullable, instants, addresses, atomic
// amounts, and a union of a domain list's literals, so an enumeration is written once, in the
// domain, and the schemas derive from it.
import { Type, type TLiteral, type TSchema } from 'typebox';

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
/** An output instant (RFC 3339). */
export const DateTime = Type.String({ format: 'date-time' });
export const NullableDateTime = Nullable(DateTime);
/** An EVM address as the API writes it. */
export const Address = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' });
/** An amount in the token's smallest unit: a non-negative integer string. */
export const ATOMIC_AMOUNT_PATTERN = '^(0|[1-9][0-9]*)$';
export const AtomicAmount = Type.String({ pattern: ATOMIC_AMOUNT_PATTERN });

/** One of a domain list's values (`ENVIRONMENTS`, `CADENCES`...): the schema follows the list. */
export const literals = <T extends string>(values: readonly T[], options: { description?: string } = {}) =>
  Type.Union(values.map((v) => Type.Literal(v)) as [TLiteral<T>], options);
