// The PostgreSQL the tests use: DATABASE_URL when set, else the machine's server on 127.0.0.1:5432,
// else a throwaway server started from Debian's postgresql binaries on a free loopback port, so a fresh
// machine with only the package installed behaves like this one.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './redis-server.js';

export interface PostgresServer {
  /** A connection string to a database on a role that may CREATE DATABASE. */
  adminUrl: string;
  stop(): Promise<void>;
}

/** A throwaway server the test may take down and bring back (same data, same port). */
export interface ThrowawayPostgres extends PostgresServer {
  /** Stops the server (fast shutdown: sessions are cut), keeping its data. */
  halt(): Promise<void>;
  /** Starts it again on the same port and waits until it answers. */
  resume(): Promise<void>;
}

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  return undefined;
}

export function systemId(flag: '-u' | '-g'): number {
  const out = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const id = Number(out.stdout.trim());
  if (out.status !== 0 || !Number.isInteger(id)) throw new Error('running as root needs the postgres system user (apt-get install -y postgresql)');
  return id;
}

export async function startThrowaway(): Promise<ThrowawayPostgres> {
  const bin = binDir();
  if (bin === undefined) throw new Error('no PostgreSQL found: set DATABASE_URL or install postgresql (apt-get install -y postgresql)');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-pg-'));
  const data = join(dir, 'data');
  // initdb refuses to run as root: run it and the server as the postgres system user then.
  const ids: { uid?: number; gid?: number } = {};
  if (process.getuid?.() === 0) {
    ids.uid = systemId('-u');
    ids.gid = systemId('-g');
    chmodSync(dir, 0o755);
    chownSync(dir, ids.uid, ids.gid);
  }
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], { encoding: 'utf8', ...ids });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  const run = async (): Promise<void> => {
    const c = spawn(
      join(bin, 'postgres'),
      ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=300'],
      { stdio: 'ignore', ...ids },
    );
    child = c;
    const deadline = Date.now() + 20_000;
    while (!(await reachable(adminUrl))) {
      if (c.exitCode !== null || Date.now() > deadline) throw new Error('the throwaway PostgreSQL did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const halt = async (): Promise<void> => {
    const c = child;
    if (c === undefined || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGINT');
    await exited;
  };
  await run();
  return {
    adminUrl,
    halt,
    resume: run,
    stop: async () => {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function findPostgres(): Promise<PostgresServer> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv !== undefined && fromEnv !== '') return { adminUrl: fromEnv, stop: async () => undefined };
  const local = 'postgres://postgres@127.0.0.1:5432/postgres';
  if (await reachable(local)) return { adminUrl: local, stop: async () => undefined };
  return startThrowaway();
}
