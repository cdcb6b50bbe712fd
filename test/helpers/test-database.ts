// A database of the file's own on the test PostgreSQL (see global-setup), migrated before the file's
// tests and dropped after them, so files never see each other's rows and a run leaves nothing behind.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { openPostgres, type Database } from '../../src/record/database.js';
import { migrate } from '../../src/record/migrate.js';

export interface TestDatabase {
  /** The migrated database; set once the file's tests start. */
  readonly db: Database;
  /** Its connection string, for a gateway child process or a second pool. */
  readonly url: string;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
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

/** Creates a fresh, migrated database; the caller drops it with the returned function. */
export async function createTestDatabase(prefix = 'tg'): Promise<{ url: string; drop(): Promise<void> }> {
  const server = inject('databaseUrl');
  const name = `${prefix.replace(/[^a-z0-9_]/g, '_')}_${randomBytes(5).toString('hex')}`;
  await admin(server, `CREATE DATABASE ${name}`);
  const url = withDatabase(server, name);
  const db = await openPostgres(url, { max: 2 });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  return { url, drop: () => admin(server, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

export function useTestDatabase(prefix = 'tg'): TestDatabase {
  let db: Database | undefined;
  let url: string | undefined;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const created = await createTestDatabase(prefix);
    url = created.url;
    drop = created.drop;
    db = await openPostgres(url);
  });
  afterAll(async () => {
    await db?.close();
    await drop?.();
  });
  return {
    get db(): Database {
      if (db === undefined) throw new Error('the test database is opened in beforeAll; use it inside a test');
      return db;
    },
    get url(): string {
      if (url === undefined) throw new Error('the test database is created in beforeAll; use it inside a test');
      return url;
    },
  };
}
