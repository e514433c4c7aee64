// The embedded PostgreSQL of `npm start` when its previous owner died without stopping it: the
// server it left running is stopped and the folder taken over; but a pid on file is only a pid. A
// postmaster.pid that outlived its server (a reboot, a killed container) may name any process by
// now, and that process is never signalled.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { useEmbeddedPostgres, type EmbeddedPostgres } from '../../src/runtime/embedded-postgres.js';
import { alive, procOf } from '../helpers/proc.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

async function folder(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'embedded-pg-'));
  // As root the server runs as the `postgres` user, which must reach its data.
  await chmod(dir, 0o755);
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function start(dir: string, lines: string[] = []): Promise<EmbeddedPostgres> {
  const log = createLogger('info', { write: (line: string) => void lines.push(line) });
  const server = await useEmbeddedPostgres(dir, 'own', log);
  cleanups.push(() => server.stop());
  return server;
}

/** A pid that ran and has ended: an owner that is gone. */
function endedPid(): number {
  return spawnSync('true').pid!;
}

async function selectOne(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ one: number }>('select 1 as one')).rows[0].one;
  } finally {
    await client.end();
  }
}

/** server.json as an owner that died (SIGKILL) leaves it: its pid no longer runs. */
async function orphan(dir: string): Promise<void> {
  const file = path.join(dir, 'server.json');
  const recorded = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
  await writeFile(file, JSON.stringify({ ...recorded, ownerPid: endedPid() }));
}

describe('the embedded PostgreSQL started again', () => {
  // Found by a newcomer's walk: `npm run api` beside `npm start` kept the URL it read, and after a
  // restart of `npm start` on another port it answered 500 until restarted itself.
  it('takes the port of its last start, so a process sharing it reconnects with the URL it has', async () => {
    const dir = await folder();
    const first = await start(dir);
    const port = new URL(first.url).port;
    await first.stop();
    const again = await start(dir);
    expect(again.url).toBe(first.url);
    expect(await selectOne(first.url)).toBe(1);
    expect(new URL(again.url).port).toBe(port);
  }, 120_000);

  // A clean-clone run failed so: another program bound the port between the probe and the
  // server's bind, and the server's "could not bind" line sat above the last lines read.
  it('takes another port when its last one is held by another program', async () => {
    const dir = await folder();
    const first = await start(dir);
    const port = Number(new URL(first.url).port);
    await first.stop();
    // A program that accepts on the port and says nothing (a probe's connection is dropped at the end).
    const sockets = new Set<net.Socket>();
    const holder = net.createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve, reject) => holder.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    cleanups.push(() => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      holder.close(resolve);
    }));
    const again = await start(dir);
    expect(Number(new URL(again.url).port)).not.toBe(port);
    expect(await selectOne(again.url)).toBe(1);
  }, 120_000);
});

describe('the embedded PostgreSQL left by a dead owner', () => {
  it('a server its owner left running is stopped, and the next start takes the folder over', async () => {
    const dir = await folder();
    const first = await start(dir);
    const postmaster = procOf(Number((await readFile(path.join(dir, 'data', 'postmaster.pid'), 'utf8')).split('\n')[0]));
    expect(postmaster).not.toBeNull();
    await orphan(dir);

    const lines: string[] = [];
    const second = await start(dir, lines);
    expect(alive(postmaster!)).toBe(false);
    expect(lines.some((l) => l.includes('stopping the embedded PostgreSQL its previous owner left running'))).toBe(true);
    expect(await selectOne(second.url)).toBe(1);
    // A server of its own (on the port of the last start: the same URL).
    const now = Number((await readFile(path.join(dir, 'data', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    expect(now).not.toBe(postmaster!.pid);
    expect(second.url).toBe(first.url);
  }, 120_000);

  it('a stale postmaster.pid naming another process: that process is not signalled', async () => {
    const dir = await folder();
    const server = await start(dir);
    const recorded = await readFile(path.join(dir, 'server.json'), 'utf8');
    await server.stop();
    // What a reboot leaves: the lock files, and their pid now another program's (SIGINT ends it).
    const bystander = spawn('sleep', ['300'], { stdio: 'ignore' });
    cleanups.push(async () => bystander.kill('SIGKILL'));
    const running = procOf(bystander.pid!);
    expect(running).not.toBeNull();
    await writeFile(path.join(dir, 'data', 'postmaster.pid'), `${bystander.pid}\n${path.join(dir, 'data')}\n`);
    await writeFile(path.join(dir, 'server.json'), recorded);
    await orphan(dir);

    const lines: string[] = [];
    const outcome = await start(dir, lines).then(
      async (s) => `answers ${await selectOne(s.url)}`,
      (err: Error) => err.message,
    );
    // PostgreSQL's own check of its lock file: as root the server runs as `postgres`, and a process
    // of another user is no postmaster of its own, so it starts; as that same user it refuses.
    if (process.getuid?.() === 0) expect(outcome).toBe('answers 1');
    else expect(outcome).toMatch(/postmaster\.pid|another postmaster/);
    expect(lines.some((l) => l.includes('its previous owner left running'))).toBe(false);
    expect(alive(running!)).toBe(true);
  }, 120_000);
});
