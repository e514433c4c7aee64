/**
 * An error in one line, for a log line or a message a person reads: viem's `shortMessage` when the
 * error has one (its full message spans many lines and may echo a request body), else the first
 * line of its message. The one home of "the first line of an error".
 */
export function firstLine(err: unknown): string {
  const e = err as { shortMessage?: unknown; message?: unknown } | null | undefined;
  const text = typeof e?.shortMessage === 'string' ? e.shortMessage : typeof e?.message === 'string' ? e.message : String(err);
  return text.split('\n')[0];
}
