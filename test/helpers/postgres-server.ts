// The PostgreSQL the tests use: DATABASE_URL when set, else the machine's server on 127.0.0.1:5432,
// else a throwaway server started from Debian's postgresql binaries on a free loopback port, so a fresh
// machine with only the package installed behaves like this one.
import { spawn, spawnSync } from 'node:child_process';
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

export async function startThrowaway(): Promise<PostgresServer> {
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
  const child = spawn(
    join(bin, 'postgres'),
    ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=300'],
    { stdio: 'ignore', ...ids },
  );
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 20_000;
  while (!(await reachable(adminUrl))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('the throwaway PostgreSQL did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    adminUrl,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT');
        await exited;
      }
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
