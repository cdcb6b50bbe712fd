// The dashboard of the one-machine run (`npm start`): plain http on loopback, so the cookie is not
// Secure unless DASHBOARD_SECURE_COOKIE says so, and a demo user of the demo account. Its top-ups (test
// mode) are started by local-main.ts and handed in.
import { randomBytes } from 'node:crypto';
import { runDashboard, type RunDashboardOptions } from './run.js';

export interface LocalDashboard {
  url: string;
  email: string;
  /** TOLLGATE_DEMO_PASSWORD, or a fresh random one printed once at start. */
  password: string;
  /** The local run's admin sign-in (DASHBOARD_ADMIN_EMAIL / DASHBOARD_ADMIN_PASSWORD, else generated). */
  admin: { email: string; password: string };
  close(): Promise<void>;
}

export async function startLocalDashboard(
  opts: Omit<RunDashboardOptions, 'env'> & { accountId: string; env?: Record<string, string | undefined> },
): Promise<LocalDashboard> {
  const given = opts.env ?? process.env;
  const env: Record<string, string | undefined> = {
    DASHBOARD_SECURE_COOKIE: 'false',
    ...given,
    DASHBOARD_ADMIN_EMAIL: given.DASHBOARD_ADMIN_EMAIL || 'admin@tollgate.local',
    DASHBOARD_ADMIN_PASSWORD: given.DASHBOARD_ADMIN_PASSWORD || randomBytes(12).toString('base64url'),
  };
  const dashboard = await runDashboard({ ...opts, env });
  const email = env.TOLLGATE_DEMO_EMAIL ?? 'demo@tollgate.local';
  const password = env.TOLLGATE_DEMO_PASSWORD !== undefined && env.TOLLGATE_DEMO_PASSWORD !== '' ? env.TOLLGATE_DEMO_PASSWORD : randomBytes(12).toString('base64url');
  await dashboard.service.provisioning.upsertUser(email, password, opts.accountId);
  return {
    url: dashboard.url,
    email,
    password,
    admin: { email: env.DASHBOARD_ADMIN_EMAIL ?? '', password: env.DASHBOARD_ADMIN_PASSWORD ?? '' },
    close: dashboard.close,
  };
}
