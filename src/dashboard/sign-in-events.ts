// Every sign-in, successful or refused, with the method it used, goes through one function: the
// SignInEvents the dashboard service was given. Today it writes a structured log line; the audit log
// (issue 40, item 2) hooks here to record them. Never a password, a code or a token: who, how, from
// where, and the reason in words.
export type SignInMethod = 'password' | 'sso';

export interface SignInEvent {
  outcome: 'success' | 'failure';
  method: SignInMethod;
  /** The address given or asserted (absent when none was). */
  email?: string;
  /** The dashboard user, when known. */
  userId?: string;
  /** SSO: the provider's issuer and the person's subject there. */
  sso?: { issuer: string; subject?: string };
  /** Client address and user agent. */
  address: string;
  userAgent?: string;
  /** Why it was refused, in words (failures only). */
  reason?: string;
}

export type SignInEvents = (event: SignInEvent) => void;

/** The default: one JSON line per sign-in to `log`. */
export function logSignIns(log: (line: string) => void): SignInEvents {
  return (e) => log(JSON.stringify({ level: e.outcome === 'success' ? 'info' : 'warn', event: 'dashboard_sign_in', ...e }));
}
