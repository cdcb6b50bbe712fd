// The dashboard of the one-machine run (`npm start`): plain http on loopback, so the cookie is not
// Secure unless DASHBOARD_SECURE_COOKIE says so, and a demo user signed in to the demo account.
import { randomBytes } from 'node:crypto';
import type { Backend } from '../billing/backends.js';
import type { Database } from '../record/database.js';
import { readDashboardConfig } from './config.js';
import { startDashboard } from './server.js';
import { DashboardService } from './service.js';

export interface LocalDashboard {
  url: string;
  email: string;
  /** TOLLGATE_DEMO_PASSWORD, or a fresh random one printed once at start. */
  password: string;
  close(): Promise<void>;
}

export async function startLocalDashboard(opts: { db: Database; backend: Backend; accountId: string; onRevoke: () => void; env?: Record<string, string | undefined> }): Promise<LocalDashboard> {
  const env = opts.env ?? process.env;
  const config = readDashboardConfig({ DASHBOARD_SECURE_COOKIE: 'false', ...env });
  const service = new DashboardService({
    db: opts.db,
    accounts: opts.backend.accounts,
    ledger: opts.backend.ledger,
    signUp: config.signUp,
    sessionTtlMs: config.sessionTtlMs,
    onRevoke: opts.onRevoke,
  });
  const email = env.TOLLGATE_DEMO_EMAIL ?? 'demo@tollgate.local';
  const password = env.TOLLGATE_DEMO_PASSWORD !== undefined && env.TOLLGATE_DEMO_PASSWORD !== '' ? env.TOLLGATE_DEMO_PASSWORD : randomBytes(12).toString('base64url');
  await service.upsertUser(email, password, opts.accountId);
  const server = await startDashboard({ service, secureCookie: config.secureCookie }, config.port, config.host);
  return { url: server.url, email, password, close: server.close };
}
