// Starting the dashboard with what it serves: the service over the record, top-ups with the providers
// configured in the environment (or, for the local run, the test-mode fakes), the providers' webhooks,
// and the top-ups catch-up job (after an outage, recent provider events are applied once each).
import type { Backend } from '../billing/backends.js';
import type { Database } from '../record/database.js';
import { paymentProvidersFromEnv, startTestModePayments } from '../top-ups/payments-config.js';
import { TopUpService, type TopUpServiceOptions } from '../top-ups/service.js';
import { readDashboardConfig } from './config.js';
import { startDashboard } from './server.js';
import { DashboardService } from './service.js';
import { checkAlerts } from './alerts.js';
import { enqueueEmail, logMailer, smtpMailer, startOutboxWorker, type OutboxWorker } from './outbox.js';
import { AutoTopUps } from '../top-ups/auto-top-up.js';
import type { SavedCards } from '../top-ups/provider.js';
import type { ReconciliationReport } from '../record/reconcile.js';

export type PaymentsMode = { real: false; stripeUrl: string; btcpayUrl: string } | { real: true; providers: string[] };

export interface RunningDashboard {
  url: string;
  service: DashboardService;
  topUps: TopUpService | undefined;
  autoTopUps: AutoTopUps | undefined;
  payments: PaymentsMode | undefined;
  outbox: OutboxWorker;
  close(): Promise<void>;
}

export interface RunDashboardOptions {
  db: Database;
  backend: Backend;
  onRevoke: () => void;
  /** The record's hot-path step for committed movements (RecordedLedger.applyCommitted); without it, no top-ups. */
  applyCommitted?: TopUpServiceOptions['applyCommitted'];
  env: Record<string, string | undefined>;
  /** With no provider configured, offer the test-mode fakes (the local run), unless TOLLGATE_PAYMENTS=off. */
  testModePayments: boolean;
  /** How often recent provider events are listed and applied (0: never). */
  catchUpIntervalMs?: number;
  /** How often balances are compared with automatic top-up thresholds (default 15 s; 0: never). */
  autoTopUpIntervalMs?: number;
  reconcile?: () => Promise<ReconciliationReport>;
  /** Start-up lines (the admin bootstrap's outcome); default: refusals to stderr. */
  log?: (line: string) => void;
  /** Where mail goes without SMTP_URL (the local run's log). */
  logMail?: (line: string) => void;
  onError?: (what: string, err: unknown) => void;
}

/** Events this far back are listed by each catch-up pass. */
const CATCH_UP_WINDOW_S = 3 * 24 * 3600;

export async function runDashboard(opts: RunDashboardOptions): Promise<RunningDashboard> {
  const config = readDashboardConfig(opts.env);
  const service = new DashboardService({
    db: opts.db,
    accounts: opts.backend.accounts,
    ledger: opts.backend.ledger,
    signUp: config.signUp,
    sessionTtlMs: config.sessionTtlMs,
    adminRequiresTotp: config.adminRequireTotp,
    onRevoke: opts.onRevoke,
  });
  const applyCommitted = opts.applyCommitted;
  const real = applyCommitted === undefined ? [] : paymentProvidersFromEnv(opts.env);
  const testMode = applyCommitted !== undefined && real.length === 0 && opts.testModePayments && opts.env.TOLLGATE_PAYMENTS !== 'off' ? await startTestModePayments(config.host) : undefined;
  const providers = testMode?.providers ?? real;
  let publicUrl = config.publicUrl ?? '';
  const topUps = providers.length === 0 || applyCommitted === undefined ? undefined : new TopUpService({ db: opts.db, providers, applyCommitted, publicUrl: () => publicUrl });
  const cardProvider = topUps === undefined ? undefined : providers.find((p): p is typeof p & { savedCards: SavedCards } => p.savedCards !== undefined);
  const autoTopUps =
    cardProvider === undefined
      ? undefined
      : new AutoTopUps({
          db: opts.db,
          provider: cardProvider,
          publicUrl: () => publicUrl,
          notifyHolders: async (tx, accountId, subject, text) => {
            const users = await tx.query<{ email: string }>('SELECT email FROM dashboard_users WHERE account_id = $1', [accountId]);
            for (const u of users.rows) await enqueueEmail(tx, { to: u.email, subject, text });
          },
          onError: (what, err) => opts.onError?.(what, err),
        });
  if (config.admin !== undefined) {
    const operators = (await opts.backend.accounts.listAccounts()).find((a) => a.name === 'operators') ?? (await opts.backend.accounts.createAccount('operators'));
    const done = await service.bootstrapAdmin(config.admin.email, config.admin.password, operators.id, config.admin.promote);
    // Refused: the dashboard still starts (the gateway beside it keeps serving), without that admin.
    if (done.outcome === 'refused') (opts.log ?? ((l) => process.stderr.write(`${l}\n`)))(JSON.stringify({ level: 'error', event: 'dashboard_admin_refused', message: done.message }));
    else (opts.log ?? (() => undefined))(JSON.stringify({ level: 'info', event: 'dashboard_admin', outcome: done.outcome, email: done.user.email }));
  }
  const server = await startDashboard(
    {
      service,
      secureCookie: config.secureCookie,
      trustProxy: config.trustProxy,
      supportEmail: config.supportEmail,
      ...(topUps === undefined ? {} : { topUps }),
      ...(autoTopUps === undefined ? {} : { autoTopUps }),
      ...(config.publicUrl === undefined ? {} : { publicUrl: config.publicUrl }),
      ...(opts.reconcile === undefined ? {} : { reconcile: opts.reconcile }),
    },
    config.port,
    config.host,
  );
  const outbox = startOutboxWorker({
    db: opts.db,
    mailer: config.smtpUrl === undefined ? logMailer(opts.logMail) : smtpMailer(config.smtpUrl, config.mailFrom),
    intervalMs: 2_000,
    onError: (err) => opts.onError?.('e-mail', err),
  });
  const alerts = setInterval(() => {
    checkAlerts(opts.db).catch((err: unknown) => opts.onError?.('alerts', err));
  }, Math.max(1_000, config.alertIntervalMs));
  alerts.unref();
  // Expired sessions and reset tokens are deleted, not only refused.
  const purge = setInterval(() => {
    service.purgeExpired().catch((err: unknown) => opts.onError?.('session purge', err));
  }, 10 * 60 * 1000);
  purge.unref();
  if (publicUrl === '') publicUrl = server.url;
  testMode?.deliverTo(server.url);
  const every = opts.catchUpIntervalMs ?? 0;
  const catchUp =
    topUps === undefined || every <= 0
      ? undefined
      : setInterval(() => {
          topUps.catchUp(Math.floor(Date.now() / 1000) - CATCH_UP_WINDOW_S).catch((err: unknown) => opts.onError?.('top-ups catch-up', err));
        }, every);
  catchUp?.unref();
  const autoEvery = opts.autoTopUpIntervalMs ?? Number(opts.env.TOLLGATE_AUTO_TOP_UP_INTERVAL_MS ?? 15_000);
  const autoCheck =
    autoTopUps === undefined || !(autoEvery > 0)
      ? undefined
      : setInterval(() => {
          autoTopUps.check().catch((err: unknown) => opts.onError?.('automatic top-ups', err));
        }, autoEvery);
  autoCheck?.unref();
  return {
    url: server.url,
    service,
    topUps,
    autoTopUps,
    payments: testMode !== undefined ? { real: false, stripeUrl: testMode.stripeUrl, btcpayUrl: testMode.btcpayUrl } : real.length > 0 ? { real: true, providers: real.map((p) => p.name) } : undefined,
    outbox,
    close: async () => {
      if (catchUp !== undefined) clearInterval(catchUp);
      if (autoCheck !== undefined) clearInterval(autoCheck);
      clearInterval(alerts);
      clearInterval(purge);
      outbox.stop();
      await server.close();
      await testMode?.close();
    },
  };
}
