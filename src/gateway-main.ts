// The production entry point (the container's `gateway` command): catalog from ModelCatalog objects
// when TOLLGATE_CATALOG_SOURCE=kubernetes (else the file), ledger in Redis (or memory without
// REDIS_URL, for trials), tracing from the standard OTEL_* variables.
import { AccountService } from './account-service/account-service.js';
import { startAuditRetention } from './audit/retention.js';
import { startAdminServer } from './admin/server.js';
import { backendFromConfig } from './backend-from-config.js';
import { createEnvSecretResolver } from './catalog/env-secrets.js';
import { createFileCatalogSource } from './catalog/file-source.js';
import type { CatalogSnapshot, CatalogSource, SecretResolver } from './catalog/snapshot.js';
import { readConfig } from './config.js';
import { RecordResponsesStore } from './responses/store.js';
import { startGateway } from './gateway.js';
import { journalWriter, openRecord } from './record/open-record.js';
import type { Database } from './record/database.js';
import { reconcile, type ReconciliationReport } from './record/reconcile.js';
import { recordedBackend } from './record/recorded-backend.js';
import { reconcileSources, startReconciler } from './record/reconcile-job.js';
import { createLogger, type TollgateLogger } from './telemetry/logger.js';
import { initTracing } from './telemetry/tracing.js';
import { startMemoryReducer } from './runtime/memory-reducer.js';

/** The catalog and upstream credentials: a ModelCatalog in Kubernetes (TOLLGATE_CATALOG_SOURCE=kubernetes), else the catalog file and the environment. */
async function openCatalog(catalogFile: string, logger: TollgateLogger): Promise<{ catalog: CatalogSource; secrets: SecretResolver }> {
  if (process.env.TOLLGATE_CATALOG_SOURCE === 'kubernetes') {
    // Loaded here only: a gateway on a catalog file never pays for the Kubernetes client.
    const { openKubeCatalog } = await import('./catalog/kube-catalog.js');
    const namespace = process.env.TOLLGATE_CATALOG_NAMESPACE;
    const onError = (err: unknown, context?: string) => logger.log.warn({ err: String(err), context }, 'kubernetes watch problem; serving the last good catalog');
    return openKubeCatalog({ ...(namespace ? { namespace } : {}), onError });
  }
  const catalog = await createFileCatalogSource(catalogFile, {
    onError: (errors) => logger.log.error({ errors }, 'catalog edit rejected; serving the last good catalog'),
  });
  return { catalog, secrets: createEnvSecretResolver() };
}

/**
 * The account holders' dashboard on DASHBOARD_PORT, over the record, and top-ups, whose webhooks it
 * serves. Loaded only when served: their modules (password hashing, mail, payment SDKs) are memory a
 * gateway without a dashboard should not carry.
 */
async function serveDashboardAndTopUps(
  served: { record: Database },
  deps: { accounts: AccountService; reconcile?: () => Promise<ReconciliationReport>; models: () => CatalogSnapshot; logger: TollgateLogger },
) {
  const onJobError = (what: string, err: unknown): void => deps.logger.log.warn({ event: 'dashboard_job_failed', what, error: String(err) }, `${what} failed`);
  const dashboardRun = await import('./dashboard/run.js');
  const dashboardConfig = (await import('./dashboard/config.js')).readDashboardConfig(process.env);
  const topUps = await (await import('./top-ups/run.js')).startTopUps({
    db: served.record,
    accounts: deps.accounts,
    env: process.env,
    testModePayments: false,
    host: dashboardConfig.host,
    ...(dashboardConfig.publicUrl === undefined ? {} : { publicUrl: dashboardConfig.publicUrl }),
    catchUpIntervalMs: 10 * 60 * 1000,
    notifyHolders: dashboardRun.mailAccountHolders,
    onError: onJobError,
  });
  const dashboard = await dashboardRun.runDashboard({
    db: served.record,
    accounts: deps.accounts,
    env: process.env,
    ...(topUps === undefined ? {} : { topUps }),
    ...(deps.reconcile === undefined ? {} : { reconcile: deps.reconcile }),
    models: deps.models,
    onError: onJobError,
  });
  topUps?.servedAt(dashboard.url);
  return { dashboard, topUps };
}

async function main(): Promise<void> {
  const config = readConfig();
  const logger = createLogger();
  const tracing = initTracing({ serviceName: 'tollgate-gateway' });
  const { catalog, secrets } = await openCatalog(config.catalogFile, logger);
  const owned = backendFromConfig(config);
  // With DATABASE_URL every settlement is journaled to PostgreSQL, the system of record.
  const record = config.databaseUrl === undefined ? undefined : await openRecord(config);
  const journal = record === undefined ? undefined : journalWriter(record, config, owned.journalStream);
  // With the record, accounts, keys and credits commit to PostgreSQL first, then Redis.
  const recorded = record === undefined ? undefined : recordedBackend(owned.backend, record, config.keyMarker, { rebuildWindowMs: config.rebuildWindowMs, unknownKeyLookupsPerSecond: config.unknownKeyLookupsPerSecond });
  const backend = recorded ?? owned.backend;
  const gateway = await startGateway({ config, catalog, backend, ...(record === undefined ? {} : { responsesStore: new RecordResponsesStore(record, Date.now, { maxBytes: config.storedResponsesMaxBytes, maxCount: config.storedResponsesMaxCount }) }), secrets, tracing, logger, ledgerHealth: owned.health, ...(journal === undefined ? {} : { journal }), ...(record === undefined ? {} : { record }) });
  const books = record === undefined ? undefined : reconcileSources(record, backend, owned.journalStream, journal);
  const reconciler =
    books === undefined
      ? undefined
      : startReconciler(books, {
          intervalMs: config.reconcileIntervalMs,
          onReport: (r) => gateway.metrics.setReconciliation(r.totalDifference, r.accountsDiffering),
          onError: (err) => logger.log.warn({ event: 'reconciliation_failed', error: String(err) }, 'reconciliation pass failed'),
        });
  const retention =
    record === undefined
      ? undefined
      : startAuditRetention(record, {
          retentionDays: config.auditRetentionDays,
          onPruned: (n) => logger.log.info({ event: 'audit_log_pruned', entries: n, retention_days: config.auditRetentionDays }, 'audit log entries past retention pruned'),
          onError: (err) => logger.log.warn({ event: 'audit_log_prune_failed', error: String(err) }, 'audit log prune failed'),
        });
  // The one account service of the process: the admin API, the dashboard and top-ups all change accounts
  // and keys through it, so a revoke always reaches this gateway's key cache.
  const accounts = new AccountService({
    accounts: backend.accounts,
    ledger: backend.ledger,
    onRevoke: () => gateway.authenticator.forget(),
    // Payments' money commits with the payment in the record, then reaches the hot path through this step.
    ...(recorded === undefined ? {} : { applyCommitted: recorded.ledger.applyCommitted.bind(recorded.ledger) }),
  });
  const served = record === undefined || recorded === undefined || process.env.DASHBOARD_PORT === undefined || process.env.DASHBOARD_PORT === '' ? undefined : { record };
  const { dashboard, topUps } =
    served === undefined
      ? {}
      : await serveDashboardAndTopUps(served, { accounts, ...(books === undefined ? {} : { reconcile: () => reconcile(books) }), models: () => catalog.current(), logger });
  const admin =
    config.adminToken === ''
      ? undefined
      : await startAdminServer(
          {
            accounts,
            ledger: backend.ledger,
            token: config.adminToken,
            ...(books === undefined || record === undefined ? {} : { reconcile: () => reconcile(books), record }),
            ...(topUps === undefined ? {} : { topUps: topUps.topUps }),
          },
          config.adminPort,
          config.host,
        );
  logger.log.info({ url: gateway.url, ledger: owned.kind, admin: admin !== undefined, dashboard: dashboard?.url, payments: topUps?.payments }, 'tollgate gateway started');
  const mib = (bytes: number): number => Math.round(bytes / 104857.6) / 10;
  const memoryReducer =
    config.memoryReducerIntervalMs === 0
      ? undefined
      : startMemoryReducer(config.memoryReducerIntervalMs, (r) =>
          logger.log.info({ event: 'memory_reduced', rss_before_mib: mib(r.rssBeforeBytes), rss_after_mib: mib(r.rssAfterBytes), pause_ms: Math.round(r.pauseMs) }, 'idle: heap pages given back'),
        );
  const stop = async (): Promise<void> => {
    memoryReducer?.stop();
    reconciler?.stop();
    retention?.stop();
    await gateway.close();
    await admin?.close();
    await dashboard?.close();
    await topUps?.close();
    await catalog.close();
    await owned.close();
    await record?.close();
    await tracing.shutdown();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}

main().catch((err: unknown) => {
  process.stderr.write(`tollgate gateway: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
