// Binding a process's HTTP ports. A port left at its default may move (several workers on one
// host each get one); a port set explicitly must be that port, or the start fails naming it.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../log.js';
import { StartupError } from './startup-error.js';

export interface PortSetting {
  port: number;
  host: string;
  /** The environment variable that sets this port, named in the start-up error. */
  variable: string;
  /** True when the variable was unset: a taken default port falls back to any free one. */
  fallbackToAny: boolean;
  /** Whether leaving the variable unset would let the port move (said in the start-up error). */
  movesWhenUnset: boolean;
}

/** Listens and returns the bound port. */
export async function listenOn(app: FastifyInstance, setting: PortSetting, log: Logger): Promise<number> {
  try {
    await app.listen({ port: setting.port, host: setting.host });
  } catch (err) {
    if ((err as { code?: string }).code !== 'EADDRINUSE') throw err;
    if (!setting.fallbackToAny) {
      throw new StartupError(
        setting.variable,
        `port ${setting.port} on ${setting.host} is already in use; set ${setting.variable} to a free port${setting.movesWhenUnset ? ' (or leave it unset for any free port)' : ''}`,
      );
    }
    await app.listen({ port: 0, host: setting.host });
    log.info({ variable: setting.variable, wanted: setting.port, port: boundPort(app) }, `default port ${setting.port} is taken; listening on a free port instead`);
  }
  return boundPort(app);
}

export function boundPort(app: FastifyInstance): number {
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : 0;
}
