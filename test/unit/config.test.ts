import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getAddress } from 'viem';
import { describe, expect, it } from 'vitest';
import { useLocalChainsFile } from '../../src/chains-config.js';
import { ConfigError, embeddedPostgresDirOf, environmentOf, loadConfig as load } from '../../src/config.js';

// The entrypoints always load the configuration with a DATABASE_URL (an embedded server's when unset).
const DB = 'postgres://postgres@db.internal:5432/invoices';
const loadConfig = (env: Record<string, string>) => load({ DATABASE_URL: DB, ...env });

// A local chain as `npm run chain` writes it (addresses in lower case: the loader checksums them).
const LOCAL_CHAIN = {
  chain_id: 31337,
  network: 'local',
  environment: 'sandbox',
  rpc_urls: ['http://127.0.0.1:8545'],
  confirmations: 2,
  fee_proxy: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
  fee_address: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
  subscription_manager: '0x9fe46736679d2d9a65f0992f2272de9f3c7fa6e0',
  start_block: 0,
  explorer_url: null,
  tokens: [{ currency: 'USDC', address: '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512', decimals: 6 }],
};

function chainsFile(chains: object[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'chains-'));
  writeFileSync(path.join(dir, 'chains.json'), JSON.stringify(chains));
  return path.join(dir, 'chains.json');
}

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe('loadConfig defaults', () => {
  it('gives every default from an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      databaseUrl: DB,
      embeddedPostgresDir: 'var/postgres',
      // Nothing but the database: BullMQ on Postgres, no Redis.
      queueBackend: 'postgres',
      redisUrl: null,
      redisPrefix: 'bull',
      port: 3000,
      // This machine only: a quick start does not offer the sandbox payment, /metrics or the worker port to the network.
      host: '127.0.0.1',
      smtpUrl: null,
      smtpPoolSize: 5,
      outboxDir: 'var/outbox',
      paymentPageBase: 'http://localhost:3000/pay',
      logLevel: 'info',
      // Readable lines on a terminal, JSON otherwise (src/log.ts prettyLogs).
      logFormat: 'auto',
      workerConcurrency: 8,
      workerPort: 3001,
      platformFeeBps: 50,
      bodyLimitBytes: 1_048_576,
      adminUser: null,
      adminPassword: null,
      outboxRelayIntervalMs: 1000,
      shutdownTimeoutMs: 10_000,
    });
    expect(c.reminders.beforeStart.toISO()).toBe('P3D');
    expect(c.reminders.beforeEvery.toISO()).toBe('P1D');
    expect(c.reminders.afterStart.toISO()).toBe('P1D');
    expect(c.reminders.afterEvery.toISO()).toBe('P7D');
    expect(c.reminders.afterMax).toBe(4);
    expect(c.reminders.localHour).toBe(9);
    expect(c.reminders.defaultTimeZone).toBe('UTC');
    expect(c.reconcileEvery.toISO()).toBe('PT1M');
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('DATABASE_URL unset: the commands run an embedded PostgreSQL in EMBEDDED_POSTGRES_DIR (default var/postgres) first', () => {
    expect(embeddedPostgresDirOf({})).toBe('var/postgres');
    expect(embeddedPostgresDirOf({ DATABASE_URL: '', EMBEDDED_POSTGRES_DIR: '/srv/pg' })).toBe('/srv/pg');
    expect(embeddedPostgresDirOf({ DATABASE_URL: DB })).toBeNull();
    const err = configError({ DATABASE_URL: '' });
    expect(err.variable).toBe('DATABASE_URL');
  });

  it('picks the queue backend: redis when REDIS_URL or REDIS_CLUSTER_NODES is set, postgres otherwise, or as QUEUE_BACKEND says', () => {
    expect(loadConfig({ REDIS_URL: 'redis://r:6379' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://r:6379' });
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000,r2:7000' })).toMatchObject({ queueBackend: 'redis' });
    expect(loadConfig({ QUEUE_BACKEND: 'redis' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://127.0.0.1:6379' });
    expect(loadConfig({ QUEUE_BACKEND: 'postgres', REDIS_URL: 'redis://r:6379' })).toMatchObject({ queueBackend: 'postgres', redisUrl: null });
    expect(loadConfig({ QUEUE_BACKEND: '', REDIS_URL: '' })).toMatchObject({ queueBackend: 'postgres', redisUrl: null });
    for (const bad of ['Redis', 'sqlite', 'pg']) {
      const err = configError({ QUEUE_BACKEND: bad });
      expect(err.variable).toBe('QUEUE_BACKEND');
      expect(err.message).toBe(`invalid configuration: QUEUE_BACKEND must be redis or postgres, got "${bad}"`);
    }
  });

  it('treats empty strings as unset', () => {
    expect(loadConfig({ PORT: '', LOG_LEVEL: '', SMTP_URL: '' })).toMatchObject({ port: 3000, logLevel: 'info', smtpUrl: null });
  });

  it('the payment page is, unset, this API\'s own on PORT (emails linked to port 3000 whatever PORT was); a given one wins', () => {
    expect(loadConfig({ PORT: '3300' }).paymentPageBase).toBe('http://localhost:3300/pay');
    expect(loadConfig({ PORT: '3300', PAYMENT_PAGE_BASE: 'https://pay.example.com/p' }).paymentPageBase).toBe('https://pay.example.com/p');
    // A port picked at listen time is not known here.
    expect(loadConfig({ PORT: '0' }).paymentPageBase).toBe('http://localhost:3000/pay');
  });

  it('reads given values', () => {
    const c = loadConfig({
      PORT: ' 8080 ',
      PAYMENT_PAGE_BASE: 'https://pay.example.com/p///',
      SMTP_URL: 'smtps://u:p@mail.example.com:465',
      REMINDERS_BEFORE_START: 'PT2S',
      REMINDERS_DEFAULT_TIME_ZONE: 'Europe/Paris',
      ADMIN_USER: 'admin',
      ADMIN_PASSWORD: 'pw',
      BODY_LIMIT_BYTES: '2048',
    });
    expect(c.port).toBe(8080);
    expect(c.paymentPageBase).toBe('https://pay.example.com/p');
    expect(c.smtpUrl).toBe('smtps://u:p@mail.example.com:465');
    expect(c.reminders.beforeStart.toMillis()).toBe(2000);
    expect(c.reminders.defaultTimeZone).toBe('Europe/Paris');
    expect(c.adminUser).toBe('admin');
    expect(c.bodyLimitBytes).toBe(2048);
  });
});

describe('REDIS_CLUSTER_NODES', () => {
  it('is off by default: single Redis from REDIS_URL', () => {
    expect(loadConfig({}).redisClusterNodes).toBeNull();
  });

  it('reads host:port startup nodes, spaces and IPv6 brackets allowed', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000, 10.0.0.2:7001 ,[::1]:7002' }).redisClusterNodes).toEqual([
      { host: 'r1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
  });

  it('means the Redis backend when QUEUE_BACKEND is unset, with 12 reminder shards by default', () => {
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000' })).toMatchObject({ queueBackend: 'redis', redisUrl: 'redis://127.0.0.1:6379', reminderShards: 12 });
    expect(loadConfig({ REDIS_URL: 'redis://r:6379' }).reminderShards).toBe(1);
    expect(loadConfig({}).reminderShards).toBe(1);
  });

  it('is refused with the Postgres backend, in one line naming it', () => {
    const err = configError({ QUEUE_BACKEND: 'postgres', REDIS_CLUSTER_NODES: 'r1:7000' });
    expect(err.variable).toBe('REDIS_CLUSTER_NODES');
    expect(err.message).toContain('QUEUE_BACKEND=redis');
    expect(err.message).not.toContain('\n');
  });
});

describe('loadConfig refuses bad values, naming the variable', () => {
  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['PORT', '1e3'],
    ['REMINDERS_BEFORE_START', '3 days'],
    ['REMINDERS_BEFORE_START', 'P0D'],
    ['REMINDERS_AFTER_EVERY', '7'],
    ['REMINDERS_LOCAL_HOUR', '24'],
    ['REMINDERS_DEFAULT_TIME_ZONE', 'Mars/Olympus'],
    ['RECONCILE_EVERY', 'soon'],
    ['DATABASE_URL', 'mysql://localhost/db'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['SMTP_URL', 'https://mail'],
    ['PAYMENT_PAGE_BASE', 'ftp://pay'],
    ['LOG_LEVEL', 'verbose'],
    ['LOG_FORMAT', 'text'],
    ['PLATFORM_FEE_BPS', '10001'],
    ['BODY_LIMIT_BYTES', '10'],
    ['WORKER_CONCURRENCY', '0'],
    ['REDIS_PREFIX', 'has space'],
    ['REDIS_PREFIX', 'has{tag}'],
    ['REDIS_CLUSTER_NODES', 'localhost'],
    ['REDIS_CLUSTER_NODES', 'a:7000,b'],
    ['REDIS_CLUSTER_NODES', 'a:0'],
    ['REDIS_CLUSTER_NODES', 'redis://a:7000'],
    ['REDIS_CLUSTER_NODES', ' , '],
  ])('%s=%j', (variable, value) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(variable);
    expect(err.message).toMatch(/^invalid configuration: /);
  });

  it('ADMIN_USER and ADMIN_PASSWORD go together', () => {
    expect(configError({ ADMIN_USER: 'admin' }).variable).toBe('ADMIN_PASSWORD');
    expect(configError({ ADMIN_PASSWORD: 'pw' }).variable).toBe('ADMIN_USER');
  });

  it('quotes the bad value', () => {
    expect(configError({ PORT: 'abc' }).message).toContain('"abc"');
    expect(configError({ REMINDERS_BEFORE_START: '3 days' }).message).toContain('"3 days"');
  });
});

describe('chain variables', () => {
  it('default to no chains file, a 2 s poll, 2,000-block log ranges and no RPC override', () => {
    expect(loadConfig({})).toMatchObject({ chainsFile: null, chainPollIntervalMs: 2000, chainGetLogsMaxBlocks: 2000, rpcUrls: {} });
  });

  it('reads CHAINS_FILE, the intervals and RPC_URL_<chainId> lists', () => {
    const file = chainsFile([{ ...LOCAL_CHAIN, rpc_urls: [] }]);
    const c = loadConfig({
      CHAINS_FILE: file,
      CHAIN_POLL_INTERVAL_MS: '500',
      CHAIN_GETLOGS_MAX_BLOCKS: '10000',
      RPC_URL_84532: 'https://sepolia.base.org, wss://base-sepolia.example/ws',
      RPC_URL_31337: 'http://127.0.0.1:8545',
      RPC_URL_1: '',
    });
    expect(c).toMatchObject({ chainsFile: file, chainPollIntervalMs: 500, chainGetLogsMaxBlocks: 10000 });
    expect(c.rpcUrls).toEqual({ 84532: ['https://sepolia.base.org', 'wss://base-sepolia.example/ws'], 31337: ['http://127.0.0.1:8545'] });
    // The file's chain joins the built-in ones; RPC_URL_<id> gives it (and Base Sepolia) their URLs.
    const local = c.chains.find((x) => x.chainId === 31337)!;
    expect(local).toMatchObject({ network: 'local', environment: 'sandbox', confirmations: 2, rpcUrls: ['http://127.0.0.1:8545'], feeAddress: LOCAL_CHAIN.fee_address });
    expect(local.feeProxy).toBe(getAddress(LOCAL_CHAIN.fee_proxy));
    expect(local.subscriptionManager).toBe(getAddress(LOCAL_CHAIN.subscription_manager));
    expect(c.chains.find((x) => x.chainId === 84532)!.rpcUrls).toHaveLength(2);
    expect(c.chains.filter((x) => x.rpcUrls.length > 0).map((x) => x.chainId).sort()).toEqual([31337, 84532]);
  });

  it('lets CHAINS_FILE override a built-in chain: its confirmations, RPC URLs, fee address and a token', () => {
    const c = loadConfig({
      CHAINS_FILE: chainsFile([{ chain_id: 8453, confirmations: 5, rpc_urls: ['https://base.example'], fee_address: LOCAL_CHAIN.fee_address, tokens: [{ currency: 'EURC', address: LOCAL_CHAIN.tokens[0].address, decimals: 6 }] }]),
    });
    const base = c.chains.find((x) => x.chainId === 8453)!;
    expect(base).toMatchObject({ network: 'base', environment: 'live', confirmations: 5, rpcUrls: ['https://base.example'], feeProxy: '0x1892196E80C4c17ea5100Da765Ab48c1fE2Fb814' });
    expect(base.tokens.map((t) => t.currency)).toEqual(['USDC', 'EURC']);
  });

  it('reads subscription_manager per chain: absent or null is none (no subscriptions there), an address is checksummed', () => {
    const { subscription_manager: _, ...withoutManager } = LOCAL_CHAIN;
    for (const [chain, expected] of [
      [withoutManager, null],
      [{ ...LOCAL_CHAIN, subscription_manager: null }, null],
      [LOCAL_CHAIN, '0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0'],
    ] as const) {
      const c = loadConfig({ CHAINS_FILE: chainsFile([chain]) });
      expect(c.chains.find((x) => x.chainId === 31337)!.subscriptionManager).toBe(expected);
    }
    // A built-in chain gains one from the file; the others keep none.
    const c = loadConfig({ CHAINS_FILE: chainsFile([{ chain_id: 84532, subscription_manager: LOCAL_CHAIN.subscription_manager }]) });
    expect(c.chains.find((x) => x.chainId === 84532)!.subscriptionManager).toBe('0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0');
    expect(c.chains.filter((x) => x.subscriptionManager !== null).map((x) => x.chainId)).toEqual([84532]);
  });

  it.each([
    ['not JSON', '{', /is not JSON/],
    ['not an array', '{}', /must hold a JSON array/],
    ['a bad address', JSON.stringify([{ ...LOCAL_CHAIN, fee_proxy: '0x1234' }]), /\[0\]\.fee_proxy must be an address/],
    ['a bad checksum', JSON.stringify([{ ...LOCAL_CHAIN, fee_address: '0x70997970c51812dc3A010C7d01b50e0d17dc79C8' }]), /\[0\]\.fee_address has mixed case/],
    ['a bad subscription_manager', JSON.stringify([{ ...LOCAL_CHAIN, subscription_manager: '0x9fe4' }]), /\[0\]\.subscription_manager must be an address/],
    ['a subscription_manager not a string', JSON.stringify([{ ...LOCAL_CHAIN, subscription_manager: 42 }]), /\[0\]\.subscription_manager must be an address string/],
    ['a bad environment', JSON.stringify([{ ...LOCAL_CHAIN, environment: 'prod' }]), /\[0\]\.environment must be "sandbox" or "live"/],
    ['an unknown field', JSON.stringify([{ ...LOCAL_CHAIN, rpc: 'x' }]), /unknown field "rpc"/],
    ['a new chain without tokens', JSON.stringify([{ chain_id: 5, network: 'goerli', environment: 'sandbox', confirmations: 1 }]), /chain 5 is not built in, so it needs tokens/],
    ['a network name taken', JSON.stringify([{ ...LOCAL_CHAIN, network: 'base' }]), /both use the network name base/],
    ['a bad RPC URL', JSON.stringify([{ ...LOCAL_CHAIN, rpc_urls: ['ftp://x'] }]), /rpc_urls\[0\] must be an absolute http\(s\) or ws\(s\) URL/],
    ['a chain that is not an object', '[5]', /chains\.json\[0\] must be an object$/],
    ['a token\'s decimals as a string', JSON.stringify([{ ...LOCAL_CHAIN, tokens: [{ ...LOCAL_CHAIN.tokens[0], decimals: '6' }] }]), /\[0\]\.tokens\[0\]\.decimals must be an integer between 0 and 36$/],
    ['a chain id out of range', JSON.stringify([{ ...LOCAL_CHAIN, chain_id: 0 }]), /\[0\]\.chain_id must be an integer between 1 and 2147483647$/],
    ['an RPC URL that is not a string', JSON.stringify([{ ...LOCAL_CHAIN, rpc_urls: [8545] }]), /\[0\]\.rpc_urls\[0\] must be a URL string$/],
  ])('refuses a CHAINS_FILE with %s, naming CHAINS_FILE and what is wrong', (_what, text, message) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'chains-'));
    writeFileSync(path.join(dir, 'chains.json'), text);
    const err = configError({ CHAINS_FILE: path.join(dir, 'chains.json') });
    expect(err.variable).toBe('CHAINS_FILE');
    expect(err.message).toMatch(message);
    expect(err.message).not.toContain('\n');
  });

  it('refuses a missing CHAINS_FILE and an RPC_URL_<chainId> of an unknown chain', () => {
    expect(configError({ CHAINS_FILE: '/nonexistent/chains.json' }).message).toMatch(/CHAINS_FILE \/nonexistent\/chains.json cannot be read \(ENOENT\)/);
    const err = configError({ RPC_URL_999: 'https://node.example' });
    expect(err.variable).toBe('RPC_URL_999');
    expect(err.message).toMatch(/names chain 999, which is neither built in nor in CHAINS_FILE/);
  });

  it.each([
    ['CHAIN_POLL_INTERVAL_MS', '49'],
    ['CHAIN_POLL_INTERVAL_MS', '3600001'],
    ['CHAIN_GETLOGS_MAX_BLOCKS', '0'],
    ['CHAIN_GETLOGS_MAX_BLOCKS', 'many'],
    ['RPC_URL_84532', 'ftp://node.example'],
    ['RPC_URL_84532', 'https://ok.example,not a url'],
    ['RPC_URL_84532', ' , '],
    ['RPC_URL_base', 'https://node.example'],
    ['RPC_URL_0', 'https://node.example'],
  ])('refuses %s=%j naming it', (variable, value) => {
    const err = configError({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(new RegExp(`^invalid configuration: ${variable} `));
    expect(err.message).not.toContain('\n');
  });
});

describe('the local chain found without configuration', () => {
  it('uses var/chain/chains.json (or CHAIN_STATE_DIR\'s) only when CHAINS_FILE is unset and the file exists', () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'found-'));
    expect(useLocalChainsFile({}, cwd)).toEqual({ env: {}, found: null });
    mkdirSync(path.join(cwd, 'var/chain'), { recursive: true });
    writeFileSync(path.join(cwd, 'var/chain/chains.json'), JSON.stringify([LOCAL_CHAIN]));
    expect(useLocalChainsFile({ LOG_LEVEL: 'warn' }, cwd)).toEqual({
      env: { LOG_LEVEL: 'warn', CHAINS_FILE: 'var/chain/chains.json' },
      found: 'var/chain/chains.json (found: npm run chain)',
    });
    expect(useLocalChainsFile({ CHAINS_FILE: '/etc/chains.json' }, cwd)).toEqual({ env: { CHAINS_FILE: '/etc/chains.json' }, found: null });
    // CHAIN_STATE_DIR moves `npm run chain`'s files, so it moves where they are looked for.
    expect(useLocalChainsFile({ CHAIN_STATE_DIR: 'elsewhere' }, cwd).found).toBeNull();
    mkdirSync(path.join(cwd, 'elsewhere'));
    writeFileSync(path.join(cwd, 'elsewhere/chains.json'), '[]');
    expect(useLocalChainsFile({ CHAIN_STATE_DIR: 'elsewhere' }, cwd).env.CHAINS_FILE).toBe('elsewhere/chains.json');
  });
});

describe('relayer variables', () => {
  const KEY = `0x${'ab'.repeat(32)}`;

  it('default to no key file, no per-chain key, 12 blocks before a replacement and a 0.01 warning threshold', () => {
    expect(loadConfig({})).toMatchObject({ relayerPrivateKeyFile: null, relayerPrivateKeys: {}, relayerStuckBlocks: 12, relayerMinBalance: '0.01' });
  });

  it('reads RELAYER_PRIVATE_KEY_<chainId> as the key itself, held as a secret that never prints; RELAYER_PRIVATE_KEY_FILE is a path, not one of the family', () => {
    const c = loadConfig({ RELAYER_PRIVATE_KEY_8453: ` ${KEY.slice(2).toUpperCase()} `, RELAYER_PRIVATE_KEY_FILE: '/run/secrets/relayer', RELAYER_STUCK_BLOCKS: '3', RELAYER_MIN_BALANCE: '0.5' });
    expect(c.relayerPrivateKeyFile).toBe('/run/secrets/relayer');
    expect(Object.keys(c.relayerPrivateKeys)).toEqual(['8453']);
    expect(c.relayerPrivateKeys[8453].reveal()).toBe(KEY);
    expect(String(c.relayerPrivateKeys[8453])).toBe('[secret]');
    expect(JSON.stringify(c)).not.toContain('abab');
    expect(c).toMatchObject({ relayerStuckBlocks: 3, relayerMinBalance: '0.5' });
  });

  it('refuses a bad key without showing it, a key of an unknown chain, and a bad threshold', () => {
    const bad = configError({ RELAYER_PRIVATE_KEY_8453: `${KEY}00` });
    expect(bad.variable).toBe('RELAYER_PRIVATE_KEY_8453');
    expect(bad.message).not.toContain('abab');
    expect(configError({ RELAYER_PRIVATE_KEY_base: KEY }).variable).toBe('RELAYER_PRIVATE_KEY_base');
    expect(configError({ RELAYER_PRIVATE_KEY_999: KEY }).message).toContain('names chain 999, which is neither built in nor in CHAINS_FILE');
    expect(configError({ RELAYER_MIN_BALANCE: '-1' }).variable).toBe('RELAYER_MIN_BALANCE');
    expect(configError({ RELAYER_MIN_BALANCE: '0.0000000000000000001' }).variable).toBe('RELAYER_MIN_BALANCE');
    expect(configError({ RELAYER_STUCK_BLOCKS: '0' }).variable).toBe('RELAYER_STUCK_BLOCKS');
  });

  it('environmentOf gives a child process the key itself', () => {
    const c = loadConfig({ RELAYER_PRIVATE_KEY_8453: KEY });
    expect(environmentOf(c, ['relayerPrivateKeys'])).toEqual({ RELAYER_PRIVATE_KEY_8453: KEY });
  });
});

describe('environmentOf', () => {
  it('gives back the variables that load the same fields', () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: 'r1:7000,[::1]:7001', REDIS_PREFIX: 't1', MAIL_FROM: 'Billing <b@example.com>', RPC_URL_8453: 'http://127.0.0.1:8545' });
    const env = environmentOf(c, ['databaseUrl', 'queueBackend', 'redisUrl', 'redisClusterNodes', 'redisPrefix', 'mailFrom', 'smtpUrl', 'rpcUrls']);
    expect(env).toEqual({
      DATABASE_URL: DB,
      QUEUE_BACKEND: 'redis',
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_CLUSTER_NODES: 'r1:7000,[::1]:7001',
      REDIS_PREFIX: 't1',
      MAIL_FROM: 'Billing <b@example.com>',
      RPC_URL_8453: 'http://127.0.0.1:8545',
    });
    expect(load(env)).toMatchObject({ redisClusterNodes: c.redisClusterNodes, redisPrefix: 't1', rpcUrls: c.rpcUrls });
  });
});
