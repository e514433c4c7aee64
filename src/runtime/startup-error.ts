import { ConfigError } from '../config.js';

/**
 * A start that cannot go on because of the deployment's setup (a port taken, a Redis prefix
 * claimed by another database): the entrypoint prints one line naming the variable to change and
 * exits 1, no stack trace.
 */
export class StartupError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

/** Runs an entrypoint's start; a StartupError or ConfigError becomes one line on stderr and exit 1. */
export async function startOrExit<T>(start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    if (err instanceof StartupError || err instanceof ConfigError) {
      process.stderr.write(`cannot start: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
