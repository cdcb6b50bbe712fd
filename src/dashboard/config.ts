// Dashboard settings, read from the environment once at start.
export interface DashboardConfig {
  port: number;
  host: string;
  /** Anyone may create an account from the sign-in page. */
  signUp: boolean;
  /** Cookie Secure attribute: on behind TLS; the local http run turns it off. */
  secureCookie: boolean;
  /** Absolute session life. */
  sessionTtlMs: number;
}

function bool(v: string | undefined, dflt: boolean): boolean {
  if (v === undefined || v === '') return dflt;
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw new Error(`expected true or false, got ${JSON.stringify(v)}`);
}

function int(v: string | undefined, name: string, dflt: number): number {
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

export function readDashboardConfig(env: Record<string, string | undefined> = process.env): DashboardConfig {
  return {
    port: int(env.DASHBOARD_PORT, 'DASHBOARD_PORT', 8082),
    host: env.HOST ?? '127.0.0.1',
    signUp: bool(env.DASHBOARD_SIGNUP, true),
    secureCookie: bool(env.DASHBOARD_SECURE_COOKIE, true),
    sessionTtlMs: int(env.DASHBOARD_SESSION_TTL_HOURS, 'DASHBOARD_SESSION_TTL_HOURS', 168) * 3_600_000,
  };
}
