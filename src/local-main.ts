// The local run, on one machine (`npm start`; production runs gateway-main.ts): the simulator as
// upstream, the example file catalog, the in-memory ledger (or Redis with REDIS_URL), a demo account
// with a balance and a demo key.
import { randomBytes } from 'node:crypto';
import { startAdminServer } from './admin/server.js';
import { backendFromConfig, type OwnedBackend } from './backend-from-config.js';
import type { Account } from './accounts/account-store.js';
import { AccountService } from './account-service/account-service.js';
import type { Database } from './record/database.js';
import { formatUsd } from './billing/money.js';
import { usdPerMillionToMicros } from './catalog/price.js';
import { createEnvSecretResolver } from './catalog/env-secrets.js';
import type { CatalogSnapshot } from './catalog/snapshot.js';
import { createFileCatalogSource } from './catalog/file-source.js';
import { readConfig } from './config.js';
import { readDashboardConfig } from './dashboard/config.js';
import { startLocalDashboard } from './dashboard/local-run.js';
import { mailAccountHolders } from './dashboard/run.js';
import { startTopUps, type PaymentsMode } from './top-ups/run.js';
import { RecordResponsesStore } from './responses/store.js';
import { startGateway } from './gateway.js';
import { journalWriter, openRecord } from './record/open-record.js';
import { reconcile } from './record/reconcile.js';
import { recordedBackend, type RecordedBackend } from './record/recorded-backend.js';
import { reconcileSources, startReconciler } from './record/reconcile-job.js';
import type { ToolScript } from './simulator/reply.js';
import { startSimulator, type Simulator } from './simulator/server.js';

async function main(): Promise<void> {
  const config = readConfig();
  const { simulator, catalog } = await startSimulatedUpstream(config.catalogFile);
  const owned = backendFromConfig(config);
  // The record: PostgreSQL with DATABASE_URL, else the embedded one under TOLLGATE_DATA_DIR. Accounts,
  // keys and credits commit there first, then the hot path.
  const record = await openRecord(config);
  const backend = recordedBackend(owned.backend, record, config.keyMarker, { rebuildWindowMs: config.rebuildWindowMs, unknownKeyLookupsPerSecond: config.unknownKeyLookupsPerSecond });
  const { ledger } = backend;
  const journal = journalWriter(record, config, owned.journalStream);

  const { account, secret } = await demoAccount(record, owned, backend);
  const gateway = await startGateway({ config, catalog, backend, responsesStore: new RecordResponsesStore(record, Date.now, { maxBytes: config.storedResponsesMaxBytes, maxCount: config.storedResponsesMaxCount }), secrets: createEnvSecretResolver(), journal, record, ledgerHealth: owned.health });
  const books = reconcileSources(record, backend, owned.journalStream, journal);
  const reconciler = startReconciler(books, {
    intervalMs: config.reconcileIntervalMs,
    onReport: (r) => gateway.metrics.setReconciliation(r.totalDifference, r.accountsDiffering),
    onError: (err) => process.stderr.write(`reconciliation failed: ${String(err)}\n`),
  });
  // Top-ups (test mode unless providers are configured), their webhooks served on the dashboard's port.
  const dashboardConfig = readDashboardConfig(process.env);
  // The one account service of the process: the admin API, the dashboard and top-ups change accounts and
  // keys through it, so a revoke always reaches the gateway's key cache.
  const accounts = new AccountService({ accounts: backend.accounts, ledger, onRevoke: () => gateway.authenticator.forget(), applyCommitted: (m, r) => ledger.applyCommitted(m, r) });
  const topUps = await startTopUps({
    db: record,
    accounts,
    env: process.env,
    testModePayments: true,
    host: dashboardConfig.host,
    ...(dashboardConfig.publicUrl === undefined ? {} : { publicUrl: dashboardConfig.publicUrl }),
    notifyHolders: mailAccountHolders,
  });
  const dashboard = await startLocalDashboard({
    db: record,
    accounts,
    accountId: account.id,
    ...(topUps === undefined ? {} : { topUps }),
    reconcile: () => reconcile(books),
    models: () => catalog.current(),
  });
  topUps?.servedAt(dashboard.url);
  const payments = topUps?.payments;
  const adminToken = config.adminToken !== '' ? config.adminToken : randomBytes(24).toString('base64url');
  const admin = await startAdminServer({ accounts, ledger, token: adminToken, reconcile: () => reconcile(books), record, ...(topUps === undefined ? {} : { topUps: topUps.topUps }) }, config.adminPort, config.host);
  const model = catalog.current().models[0]?.id ?? 'outlaw-1-xploded';
  const balance = await ledger.balance(account.id);
  process.stdout.write(
    banner({ gatewayUrl: gateway.url, ledgerKind: owned.kind, simulatorUrl: simulator.url, accountId: account.id, balance: balance.balance, secret, model, metricsUrl: `http://${config.host}:${gateway.metricsServer?.port ?? config.metricsPort}/metrics`, adminUrl: admin.url, adminToken: config.adminToken !== '' ? 'from TOLLGATE_ADMIN_TOKEN' : adminToken, dashboard, payments }),
  );
  const stop = async (): Promise<void> => {
    reconciler.stop();
    await gateway.close();
    await admin.close();
    await dashboard.close();
    await topUps?.close();
    await catalog.close();
    await owned.close();
    await record.close();
    await simulator.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

/**
 * The simulator as the upstream, and the file catalog: the simulator reasons for exactly the models the
 * catalog flags as reasoning, so a client sees the reasoning output (thinking blocks, reasoning_content)
 * it would get from the real model.
 */
async function startSimulatedUpstream(catalogFile: string): Promise<{ simulator: Simulator; catalog: Awaited<ReturnType<typeof createFileCatalogSource>> }> {
  const reasoningModels = new Set<string>();
  const toolScript = simToolScript(process.env.SIM_TOOL_SCRIPT);
  const simulator = await startSimulator({
    port: Number(process.env.SIM_PORT ?? 0),
    log: false,
    reasoningModels,
    ...(toolScript === undefined ? {} : { toolScript }),
    // Prompt caching as the upstreams report it (cache_control, prompt_cache_key), to see cache prices at work.
    promptCache: process.env.SIM_PROMPT_CACHE === '1',
  });
  process.env.TOLLGATE_SIMULATOR_URL ??= simulator.url;
  const catalog = await createFileCatalogSource(catalogFile, {
    onError: (errors) => {
      for (const e of errors) process.stderr.write(`catalog: ${e.source}: ${e.path}: ${e.message} (keeping the last good catalog)\n`);
    },
  });
  const trackReasoning = (snapshot: CatalogSnapshot): void => {
    reasoningModels.clear();
    for (const m of snapshot.models) if (m.supportsReasoning) for (const u of m.upstreams) reasoningModels.add(u.upstreamModel);
  };
  trackReasoning(catalog.current());
  catalog.onSwap(trackReasoning);
  return { simulator, catalog };
}

/** The demo account with its starting balance (once; a restart of the memory run rebuilds it from the record) and its key. */
async function demoAccount(record: Database, owned: OwnedBackend, backend: RecordedBackend): Promise<{ account: Account; secret: string }> {
  const { accounts, ledger } = backend;
  const existing = (await accounts.listAccounts()).find((a) => a.name === 'demo');
  // getAccount seeds a hot path that does not have the recorded account yet (a restart of the memory run).
  const account = (existing === undefined ? undefined : await accounts.getAccount(existing.id)) ?? (await accounts.createAccount('demo'));
  const balanceUsd = process.env.TOLLGATE_DEMO_BALANCE_USD ?? '10.00';
  if (existing !== undefined && owned.kind === 'memory') {
    // A restart of the memory run: the balance comes back from the record (credits less what the
    // journal charged), applied to the empty hot path under a key of this start only; the starting
    // credit is already on the record and is not given twice.
    // The totals count every movement the record has, so none is left pending for the hot path.
    const totals = await record.transaction(async (tx) => {
      await tx.query(`UPDATE ledger_entries SET applied_at = now() WHERE account_id = $1 AND applied_at IS NULL AND kind <> 'usage'`, [account.id]);
      return tx.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [account.id]);
    });
    const recorded = totals.rows[0]?.balance ?? 0;
    if (recorded > 0) await owned.backend.ledger.credit(account.id, recorded, `rebuild-${account.id}-${Date.now()}`);
  } else {
    await ledger.credit(account.id, usdPerMillionToMicros(balanceUsd), `demo-start-balance-${account.id}`);
  }
  const demoKey = process.env.TOLLGATE_DEMO_KEY;
  let secret: string;
  if (demoKey !== undefined && demoKey !== '') {
    await accounts.importKey(account.id, demoKey, { name: 'demo' });
    secret = demoKey;
  } else {
    secret = (await accounts.createKey(account.id, { name: 'demo' })).secret;
  }

  return { account, secret };
}

/** What `npm start` prints: where everything is, the demo key, a curl to paste. */
function banner(b: {
  gatewayUrl: string;
  ledgerKind: string;
  simulatorUrl: string;
  accountId: string;
  balance: number;
  secret: string;
  model: string;
  metricsUrl: string;
  adminUrl: string;
  adminToken: string;
  dashboard: { url: string; email: string; password: string; admin: { email: string; password: string } };
  payments: PaymentsMode | undefined;
}): string {
  return [
    '',
    `Tollgate is running at ${b.gatewayUrl}/v1 (ledger: ${b.ledgerKind}, upstream: simulator at ${b.simulatorUrl})`,
    `Demo account ${b.accountId}, balance ${formatUsd(b.balance)} USD`,
    `API key: ${b.secret}`,
    '',
    'Try it:',
    `curl -s ${b.gatewayUrl}/v1/chat/completions -H "Authorization: Bearer ${b.secret}" -H "Content-Type: application/json" -d '{"model":"${b.model}","messages":[{"role":"user","content":"Hello!"}]}'`,
    '',
    `Metrics: ${b.metricsUrl}`,
    `Admin API: ${b.adminUrl}/admin (token: ${b.adminToken})`,
    `Dashboard: ${b.dashboard.url} (sign in as ${b.dashboard.email}, password ${b.dashboard.password})`,
    `Dashboard admin: ${b.dashboard.admin.email}, password ${b.dashboard.admin.password}`,
    b.payments === undefined
      ? 'Top-ups: off'
      : b.payments.real
        ? `Top-ups: ${b.payments.providers.join(', ')} (live keys from the environment)`
        : `Top-ups: TEST MODE, no real money (${b.payments.fakes.map((f) => `fake ${f.title} at ${f.url}`).join(', ')})`,
    '',
  ].join('\n');
}

/** SIM_TOOL_SCRIPT: {"tool": "<name>", "arguments": {...}}, a scripted tool call for demos (src/simulator/reply.ts). */
function simToolScript(raw: string | undefined): ToolScript | undefined {
  if (raw === undefined || raw === '') return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new Error('SIM_TOOL_SCRIPT must be JSON like {"tool":"exec_command","arguments":{"cmd":"ls"}}');
  }
  const o = v as Partial<ToolScript>;
  if (typeof o !== 'object' || o === null || typeof o.tool !== 'string' || typeof o.arguments !== 'object' || o.arguments === null || Array.isArray(o.arguments)) {
    throw new Error('SIM_TOOL_SCRIPT must be {"tool": "<tool name>", "arguments": {<object>}}');
  }
  return { tool: o.tool, arguments: o.arguments };
}

main().catch((err: unknown) => {
  process.stderr.write(`tollgate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
