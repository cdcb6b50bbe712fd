// The production entry point (the container's `gateway` command): catalog from ModelCatalog objects
// when TOLLGATE_CATALOG_SOURCE=kubernetes (else the file), ledger in Redis (or memory without
// REDIS_URL, for trials), tracing from the standard OTEL_* variables.
import { KubeConfig } from '@kubernetes/client-node';
import { startAdminServer } from './admin/server.js';
import { backendFromConfig } from './backend-from-config.js';
import { createEnvSecretResolver } from './catalog/env-secrets.js';
import { createFileCatalogSource } from './catalog/file-source.js';
import { createKubeCatalogSource } from './catalog/kube-source.js';
import { createKubeSecretResolver } from './catalog/kube-secrets.js';
import type { CatalogSource, SecretResolver } from './catalog/snapshot.js';
import { readConfig } from './config.js';
import { startGateway } from './gateway.js';
import { journalWriter, openRecord } from './record/open-record.js';
import { reconcile } from './record/reconcile.js';
import { recordedBackend } from './record/recorded-backend.js';
import { reconcileSources, startReconciler } from './record/reconcile-job.js';
import { createLogger } from './telemetry/logger.js';
import { initTracing } from './telemetry/tracing.js';

async function main(): Promise<void> {
  const config = readConfig();
  const logger = createLogger();
  const tracing = initTracing({ serviceName: 'tollgate-gateway' });
  let catalog: CatalogSource;
  let secrets: SecretResolver;
  if (process.env.TOLLGATE_CATALOG_SOURCE === 'kubernetes') {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    const namespace = process.env.TOLLGATE_CATALOG_NAMESPACE;
    const onError = (err: unknown, context?: string) => logger.log.warn({ err: String(err), context }, 'kubernetes watch problem; serving the last good catalog');
    catalog = await createKubeCatalogSource({ kubeConfig, ...(namespace ? { namespace } : {}), onError });
    secrets = await createKubeSecretResolver({ kubeConfig, ...(namespace ? { namespace } : {}), onError });
  } else {
    catalog = await createFileCatalogSource(config.catalogFile, {
      onError: (errors) => logger.log.error({ errors }, 'catalog edit rejected; serving the last good catalog'),
    });
    secrets = createEnvSecretResolver();
  }
  const owned = backendFromConfig(config);
  // With DATABASE_URL every settlement is journaled to PostgreSQL, the system of record.
  const record = config.databaseUrl === undefined ? undefined : await openRecord(config);
  const journal = record === undefined ? undefined : journalWriter(record, config, owned.journalStream);
  // With the record, accounts, keys and credits commit to PostgreSQL first, then Redis.
  const backend = record === undefined ? owned.backend : recordedBackend(owned.backend, record, config.keyMarker);
  const gateway = await startGateway({ config, catalog, backend, secrets, tracing, logger, ledgerHealth: owned.health, ...(journal === undefined ? {} : { journal }) });
  const books = record === undefined ? undefined : reconcileSources(record, backend, owned.journalStream, journal);
  const reconciler =
    books === undefined
      ? undefined
      : startReconciler(books, {
          intervalMs: config.reconcileIntervalMs,
          onReport: (r) => gateway.metrics.setReconciliation(r.totalDifference, r.accountsDiffering),
          onError: (err) => logger.log.warn({ event: 'reconciliation_failed', error: String(err) }, 'reconciliation pass failed'),
        });
  const admin =
    config.adminToken === ''
      ? undefined
      : await startAdminServer(
          { backend, token: config.adminToken, onRevoke: () => gateway.authenticator.forget(), ...(books === undefined ? {} : { reconcile: () => reconcile(books) }) },
          config.adminPort,
          config.host,
        );
  logger.log.info({ url: gateway.url, ledger: owned.kind, admin: admin !== undefined }, 'tollgate gateway started');
  const stop = async (): Promise<void> => {
    reconciler?.stop();
    await gateway.close();
    await admin?.close();
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
