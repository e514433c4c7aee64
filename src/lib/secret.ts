import { inspect } from 'node:util';

const HIDDEN = '[secret]';

/**
 * A value that must never be printed (a private key): JSON, string conversion and util.inspect
 * (pino, console, vitest diffs) all show "[secret]"; only `reveal()` gives the value, and the one
 * caller that needs it (the signer) asks for it once.
 */
export class Secret<T> {
  readonly #value: T;

  constructor(value: T) {
    this.#value = value;
  }

  reveal(): T {
    return this.#value;
  }

  toString(): string {
    return HIDDEN;
  }

  toJSON(): string {
    return HIDDEN;
  }

  [inspect.custom](): string {
    return HIDDEN;
  }
}
