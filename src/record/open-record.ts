// Opening the record at start-up: the database (PostgreSQL by URL, else PGlite in the data folder),
// migrated, and the journal writer that carries the hot path's settlements into it.
import type { GatewayConfig } from '../config.js';
import { openDatabase, type Database } from './database.js';
import { JournalWriter, type JournalStream } from './journal-writer.js';
import { migrate } from './migrate.js';

export async function openRecord(config: Pick<GatewayConfig, 'databaseUrl' | 'dataDir'>): Promise<Database> {
  const db = await openDatabase({ ...(config.databaseUrl === undefined ? {} : { url: config.databaseUrl }), dataDir: config.dataDir });
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

export function journalWriter(db: Database, config: Pick<GatewayConfig, 'journalMaxLagMs'>, stream: JournalStream | undefined): JournalWriter {
  return new JournalWriter({ db, maxLagMs: config.journalMaxLagMs, ...(stream === undefined ? {} : { stream }) });
}
