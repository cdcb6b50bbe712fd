// Starting the dashboard with what it serves: the service over the record, the admin bootstrap, the
// mail outbox and the periodic jobs (alerts, session purge). Top-ups are started by the process entry
// point (top-ups/run.ts) and handed in: the dashboard serves their pages and their webhook routes.
import type { AccountService } from '../account-service/account-service.js';
import type { CatalogSnapshot } from '../catalog/snapshot.js';
import { asActor } from '../record/change-actor.js';
import type { Database, Queryable } from '../record/database.js';
import type { RunningTopUps } from '../top-ups/run.js';
import { readDashboardConfig } from './config.js';
import { startDashboard } from './server.js';
import { DashboardService } from './service.js';
import { checkAlerts } from './alerts.js';
import { memberEmailsWith } from './memberships.js';
import { enqueueEmail, logMailer, smtpMailer, startOutboxWorker, type OutboxWorker } from './outbox.js';
import { logSignIns } from './sign-in-events.js';
import type { ReconciliationReport } from '../record/reconcile.js';

export interface RunningDashboard {
  url: string;
  service: DashboardService;
  outbox: OutboxWorker;
  close(): Promise<void>;
}

export interface RunDashboardOptions {
  db: Database;
  /** The process's one account service (its revoke tells the gateway's key cache). */
  accounts: AccountService;
  env: Record<string, string | undefined>;
  /** Top-ups to serve (their pages and webhooks), started by the entry point; absent: no top-ups. */
  topUps?: Pick<RunningTopUps, 'topUps' | 'autoTopUps' | 'webhooks'>;
  reconcile?: () => Promise<ReconciliationReport>;
  /** Start-up lines (the admin bootstrap's outcome); default: refusals to stderr. */
  log?: (line: string) => void;
  /** Where mail goes without SMTP_URL (the local run's log). */
  logMail?: (line: string) => void;
  onError?: (what: string, err: unknown) => void;
  /** The catalog the gateway serves, for the Models page. */
  models?: () => CatalogSnapshot;
}

/** Mails the members who add money to an account (its owners and billing members), in the caller's transaction (top-ups' notices). */
export async function mailAccountHolders(tx: Queryable, accountId: string, subject: string, text: string): Promise<void> {
  for (const to of await memberEmailsWith(tx, accountId, 'billing.manage')) await enqueueEmail(tx, { to, subject, text });
}

export async function runDashboard(opts: RunDashboardOptions): Promise<RunningDashboard> {
  const config = readDashboardConfig(opts.env);
  const service = new DashboardService({
    db: opts.db,
    accounts: opts.accounts,
    signUp: config.signUp,
    sessionTtlMs: config.sessionTtlMs,
    adminRequiresTotp: config.adminRequireTotp,
    signInEvents: logSignIns(opts.log ?? ((l) => process.stderr.write(`${l}\n`))),
    ...(config.sso === undefined ? {} : { sso: { config: config.sso, secureCookie: config.secureCookie } }),
    ...(opts.log === undefined ? {} : { log: opts.log }),
  });
  // The provider's discovery, early: a wrong issuer shows in the log at start, not at the first sign-in.
  service.sso?.provider.warmUp().catch((err: unknown) => opts.onError?.('single sign-on discovery', err));
  const admin = config.admin;
  if (admin !== undefined) {
    // The audit log names the start-up as the author of the operators' account and the admin it sets up.
    const done = await asActor({ kind: 'system', label: 'dashboard start-up (DASHBOARD_ADMIN_EMAIL)' }, async () => {
      const operators = (await opts.accounts.listAccounts()).find((a) => a.name === 'operators') ?? (await opts.accounts.createAccount('operators'));
      return service.provisioning.bootstrapAdmin(admin.email, admin.password, operators.id, admin.promote);
    });
    // Refused: the dashboard still starts (the gateway beside it keeps serving), without that admin.
    if (done.outcome === 'refused') (opts.log ?? ((l) => process.stderr.write(`${l}\n`)))(JSON.stringify({ level: 'error', event: 'dashboard_admin_refused', message: done.message }));
    else (opts.log ?? (() => undefined))(JSON.stringify({ level: 'info', event: 'dashboard_admin', outcome: done.outcome, email: done.user.email }));
  }
  const topUps = opts.topUps;
  const server = await startDashboard(
    {
      service,
      secureCookie: config.secureCookie,
      trustProxy: config.trustProxy,
      supportEmail: config.supportEmail,
      ...(topUps === undefined ? {} : { topUps: topUps.topUps, webhooks: topUps.webhooks }),
      ...(topUps?.autoTopUps === undefined ? {} : { autoTopUps: topUps.autoTopUps }),
      ...(config.publicUrl === undefined ? {} : { publicUrl: config.publicUrl }),
      ...(opts.reconcile === undefined ? {} : { reconcile: opts.reconcile }),
      ...(opts.models === undefined ? {} : { models: opts.models }),
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
    asActor({ kind: 'system', label: 'balance alerts' }, () => checkAlerts(opts.db)).catch((err: unknown) => opts.onError?.('alerts', err));
  }, Math.max(1_000, config.alertIntervalMs));
  alerts.unref();
  // Expired sessions and reset tokens are deleted, not only refused.
  const purge = setInterval(() => {
    asActor({ kind: 'system', label: 'session purge' }, () => service.identity.purgeExpired()).catch((err: unknown) => opts.onError?.('session purge', err));
  }, 10 * 60 * 1000);
  purge.unref();
  return {
    url: server.url,
    service,
    outbox,
    close: async () => {
      clearInterval(alerts);
      clearInterval(purge);
      outbox.stop();
      await server.close();
    },
  };
}
