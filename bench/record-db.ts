// The bench's PostgreSQL of record: a fresh, migrated database on the server the tests use
// (DATABASE_URL, the machine's on 127.0.0.1:5432, or a throwaway one), dropped after the run.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPostgres } from '../src/record/database.js';
import { migrate } from '../src/record/migrate.js';
import { findPostgres } from '../test/helpers/postgres-server.js';
import { pidsWhere } from './targets.js';

export interface BenchDatabase {
  url: string;
  /** The server processes serving this database's connections now (Linux /proc), for their CPU time. */
  backendPids(): number[];
  /**
   * Every process of the PostgreSQL servers on this machine: the postmaster, whose children (backends,
   * autovacuum workers) inherit where it may run, and its background writers. To keep all of them off
   * the gateway's core; a server on another machine has none here.
   */
  serverPids(): number[];
  /** Another empty database on the same server (a peer's own), dropped with this one. */
  sibling(): Promise<{ url: string; backendPids(): number[] }>;
  drop(): Promise<void>;
}

async function admin(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** PostgreSQL backends name their database in their process title: `postgres: … <user> <db> <client> …`. */
function serverProcessesOf(database: string): number[] {
  return pidsWhere((title) => title.startsWith('postgres:') && title.includes(` ${database} `));
}

export async function createBenchDatabase(): Promise<BenchDatabase> {
  const server = await findPostgres();
  const name = `bench_${randomBytes(5).toString('hex')}`;
  await admin(server.adminUrl, `CREATE DATABASE ${name}`);
  const u = new URL(server.adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const db = await openPostgres(url, { max: 1 });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  const siblings: string[] = [];
  return {
    url,
    backendPids: () => serverProcessesOf(name),
    sibling: async () => {
      const other = `${name}_${siblings.length + 1}`;
      await admin(server.adminUrl, `CREATE DATABASE ${other}`);
      siblings.push(other);
      const v = new URL(server.adminUrl);
      v.pathname = `/${other}`;
      return { url: v.toString(), backendPids: () => serverProcessesOf(other) };
    },
    // `comm` stays `postgres` for the postmaster and every child, whatever their titles say.
    serverPids: () => pidsWhere((comm) => comm.trim() === 'postgres', 'comm'),
    drop: async () => {
      for (const other of siblings) await admin(server.adminUrl, `DROP DATABASE IF EXISTS ${other} WITH (FORCE)`);
      await admin(server.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await server.stop();
    },
  };
}
