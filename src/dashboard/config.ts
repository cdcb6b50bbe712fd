// Dashboard settings, read from the environment once at start.
import { readSsoConfig, type SsoConfig } from './sso-config.js';

export interface DashboardConfig {
  port: number;
  host: string;
  /** Anyone may create an account from the sign-in page. */
  signUp: boolean;
  /** Cookie Secure attribute: on behind TLS; the local http run turns it off. */
  secureCookie: boolean;
  /** Absolute session life. */
  sessionTtlMs: number;
  /** The address browsers use (behind an ingress): the Origin check and the payment providers' return URLs. */
  publicUrl?: string;
  /** Where refund requests go (DASHBOARD_SUPPORT_EMAIL). */
  supportEmail: string;
  /** SMTP server for the outbox (SMTP_URL, e.g. smtps://user:pass@mail.example.com); unset: mail is logged. */
  smtpUrl?: string;
  mailFrom: string;
  /**
   * An admin user made (or re-passworded) at start: DASHBOARD_ADMIN_EMAIL and DASHBOARD_ADMIN_PASSWORD.
   * An address that belongs to a holder is refused unless DASHBOARD_ADMIN_PROMOTE names it a promotion.
   */
  admin?: { email: string; password: string; promote: boolean };
  /** Admin pages need a session opened with TOTP (DASHBOARD_ADMIN_REQUIRE_TOTP). */
  adminRequireTotp: boolean;
  /** Pause between alert passes. */
  alertIntervalMs: number;
  /** Client addresses from X-Forwarded-For (behind an ingress). */
  trustProxy: boolean;
  /** Single sign-on through the company's OpenID provider (DASHBOARD_SSO_*, sso-config.ts); absent: off. */
  sso?: SsoConfig;
}

function bool(v: string | undefined, dflt: boolean): boolean {
  if (v === undefined || v === '') return dflt;
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw new Error(`expected true or false, got ${JSON.stringify(v)}`);
}

function named(name: string, v: string | undefined, dflt: boolean): boolean {
  try {
    return bool(v, dflt);
  } catch (err) {
    throw new Error(`${name}: ${(err as Error).message}`);
  }
}

function int(v: string | undefined, name: string, dflt: number): number {
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

function publicUrl(v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`DASHBOARD_PUBLIC_URL must be an absolute http(s) URL, got ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`DASHBOARD_PUBLIC_URL must be http(s), got ${JSON.stringify(v)}`);
  return u.origin;
}

export function readDashboardConfig(env: Record<string, string | undefined> = process.env): DashboardConfig {
  const publicOrigin = env.DASHBOARD_PUBLIC_URL === undefined || env.DASHBOARD_PUBLIC_URL === '' ? undefined : publicUrl(env.DASHBOARD_PUBLIC_URL);
  const sso = readSsoConfig(env, publicOrigin);
  return {
    port: int(env.DASHBOARD_PORT, 'DASHBOARD_PORT', 8082),
    host: env.HOST ?? '127.0.0.1',
    signUp: bool(env.DASHBOARD_SIGNUP, true),
    secureCookie: bool(env.DASHBOARD_SECURE_COOKIE, true),
    sessionTtlMs: int(env.DASHBOARD_SESSION_TTL_HOURS, 'DASHBOARD_SESSION_TTL_HOURS', 168) * 3_600_000,
    ...(publicOrigin === undefined ? {} : { publicUrl: publicOrigin }),
    supportEmail: env.DASHBOARD_SUPPORT_EMAIL || 'support@tollgate.local',
    ...(env.SMTP_URL === undefined || env.SMTP_URL === '' ? {} : { smtpUrl: env.SMTP_URL }),
    mailFrom: env.MAIL_FROM || 'Tollgate <no-reply@tollgate.local>',
    ...(env.DASHBOARD_ADMIN_EMAIL && env.DASHBOARD_ADMIN_PASSWORD
      ? { admin: { email: env.DASHBOARD_ADMIN_EMAIL, password: env.DASHBOARD_ADMIN_PASSWORD, promote: named('DASHBOARD_ADMIN_PROMOTE', env.DASHBOARD_ADMIN_PROMOTE, false) } }
      : {}),
    adminRequireTotp: named('DASHBOARD_ADMIN_REQUIRE_TOTP', env.DASHBOARD_ADMIN_REQUIRE_TOTP, false),
    trustProxy: bool(env.DASHBOARD_TRUST_PROXY, false),
    alertIntervalMs: int(env.DASHBOARD_ALERT_INTERVAL_SECONDS, 'DASHBOARD_ALERT_INTERVAL_SECONDS', 60) * 1000,
    ...(sso === undefined ? {} : { sso }),
  };
}
