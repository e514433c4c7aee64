// `invoice-lifecycle migrate` (`npm run migrate`): creates the database if needed and applies pending migrations.
import { loadConfigOrExit } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { createLogger, prettyLogs, redactUrl } from '../src/log.js';
import { chooseDatabaseOrExit } from '../src/runtime/database.js';

const database = await chooseDatabaseOrExit(process.env, 'share');
const config = loadConfigOrExit(database.env);
const log = createLogger(config.logLevel, undefined, { pretty: prettyLogs(config.logFormat) });
try {
  await migrate(config.databaseUrl, (msg) => log.debug(msg), { queueSchema: config.queueBackend === 'postgres' });
  log.info({ database: redactUrl(config.databaseUrl) }, 'migrations applied');
} catch (err) {
  log.error({ err }, 'migration failed');
  process.exit(1);
} finally {
  await database.stop();
}
