// `npm run reconcile`: compares PostgreSQL (DATABASE_URL, else the local run's embedded database) with
// the hot path (REDIS_URL) and the usage records for every account, prints the report as JSON and
// exits 1 when anything differs, so it can gate a deploy or a cron job.
import { backendFromConfig, ledgerRedisTarget } from '../backend-from-config.js';
import { readConfig } from '../config.js';
import { openRecord } from './open-record.js';
import { reconcile } from './reconcile.js';
import { reconcileSources } from './reconcile-job.js';

async function main(): Promise<void> {
  const config = readConfig();
  if (ledgerRedisTarget(config) === undefined) {
    process.stderr.write('reconcile: neither REDIS_URL nor REDIS_CLUSTER_NODES is set; the memory hot path lives inside the running gateway (use GET /admin/reconciliation there)\n');
    process.exit(2);
  }
  const owned = backendFromConfig(config);
  const db = await openRecord(config);
  try {
    const report = await reconcile(reconcileSources(db, owned.backend, owned.journalStream, undefined));
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    process.exitCode = report.differences.length === 0 ? 0 : 1;
  } finally {
    await db.close();
    await owned.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`reconcile: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
});
