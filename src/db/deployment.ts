// SQL of the deployment table: this database's identity, made on first use.
import type { Queryable } from './pool.js';

export interface DeploymentIdentity {
  id: string;
  /** `host:port/database` of the connection, for messages (no credentials). */
  database: string;
}

export async function deploymentIdentity(db: Queryable): Promise<DeploymentIdentity> {
  // Two processes starting at once insert the same singleton: one wins, both read it.
  await db.query('insert into deployment default values on conflict (singleton) do nothing');
  const { rows } = await db.query<{ id: string; database: string }>(
    `select d.id::text as id, coalesce(host(inet_server_addr()), 'local') || ':' || coalesce(inet_server_port()::text, '') || '/' || current_database() as database
       from deployment d`,
  );
  return rows[0];
}
