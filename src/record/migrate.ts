// Schema migrations: plain SQL files in ./migrations, applied in name order, each once. Numbering by
// part of the product keeps parallel work apart: 001-019 the record (accounts, keys, ledger, usage,
// journal), 020-039 the dashboard, 040-059 payments, 060-079 the Responses API's stored responses, 080-099
// the audit log (last, so its triggers can name every table before it).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Database } from './database.js';

// Any constant shared by every process that migrates: two pods starting together apply each file once.
const MIGRATION_LOCK = 7_349_001;

export interface Migration {
  name: string;
  sql: string;
}

function migrationsDir(): URL {
  // Beside this module when run from source; from the compiled tree (dist/src/record) the build may not
  // copy .sql files, so fall back to the sources.
  const here = new URL('./migrations/', import.meta.url);
  return existsSync(here) ? here : new URL('../../../src/record/migrations/', import.meta.url);
}

export function loadMigrations(dir: URL = migrationsDir()): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, sql: readFileSync(new URL(name, dir), 'utf8') }));
}

/** Applies what is pending, in one transaction; returns the names applied. */
export async function migrate(db: Database, migrations: Migration[] = loadMigrations()): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await tx.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    const applied: string[] = [];
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (name) VALUES ($1)', [m.name]);
      applied.push(m.name);
    }
    return applied;
  });
}
