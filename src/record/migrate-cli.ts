// `npm run migrate` (and the image's `migrate` argument, run by the chart's pre-install/pre-upgrade
// Job): applies the pending schema migrations to DATABASE_URL (else the local run's embedded database)
// and prints their names. Safe to run again and from several places at once (an advisory lock).
import { readConfig } from '../config.js';
import { openDatabase } from './database.js';
import { migrate } from './migrate.js';

async function main(): Promise<void> {
  const config = readConfig();
  const db = await openDatabase({ ...(config.databaseUrl === undefined ? {} : { url: config.databaseUrl }), dataDir: config.dataDir });
  try {
    const applied = await migrate(db);
    process.stdout.write(applied.length === 0 ? 'migrate: the schema is up to date\n' : `migrate: applied ${applied.join(', ')}\n`);
  } finally {
    await db.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
