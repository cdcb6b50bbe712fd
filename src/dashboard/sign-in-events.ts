// Sign-ins and what else a person does to their own access that changes no recorded row, as audit log
// entries (src/audit/events.ts): every way in (a password with or without its second factor, and the
// company's OpenID provider) calls recordSignIn, so the log reads the same however someone signed in.
// Never the password, a code or a token: only which way, and why a refusal was one.
import { recordAuditEvent } from '../audit/events.js';
import { asActor, currentActor } from '../record/change-actor.js';
import type { Queryable } from '../record/database.js';

/** How someone signed in (or tried to). */
export type SignInMethod = 'password' | 'sso';
/** The second factor given with a password. */
export type SecondFactorMethod = 'totp' | 'recovery_code';

/** Why a sign-in was refused, in the log's words. */
export type SignInFailure = 'unknown_address' | 'wrong_password' | 'second_factor_missing' | 'second_factor_wrong' | 'refused_by_provider' | 'sso_refused' | 'sso_only';

/** The person a sign-in was for, once known. */
export interface SignInUser {
  id: string;
  email: string;
  /** Their personal account: the entry is about it (owners of it read it). */
  accountId: string;
}

export type SignInOutcome =
  | { succeeded: true; user: SignInUser; method: SignInMethod; secondFactor?: SecondFactorMethod }
  | { succeeded: false; user?: SignInUser; method: SignInMethod; secondFactor?: SecondFactorMethod; reason: SignInFailure; /** The refusal in words (an SSO one's check). */ why?: string };

/**
 * One entry per sign-in, succeeded or failed. The user who signed in is named as the actor (the
 * request's address and user agent kept); a failure's actor stays the anonymous visitor, and the user
 * whose account was tried is its target. An address that has no account is not written down, as someone
 * may have typed their password into the address field.
 */
export async function recordSignIn(q: Queryable, outcome: SignInOutcome): Promise<void> {
  const detail = {
    method: outcome.method,
    ...(outcome.secondFactor === undefined ? {} : { second_factor: outcome.secondFactor }),
    ...(outcome.succeeded ? {} : { reason: outcome.reason, ...(outcome.why === undefined ? {} : { why: outcome.why }) }),
  };
  const write = (): Promise<void> =>
    recordAuditEvent(q, {
      action: outcome.succeeded ? 'sign_in.succeeded' : 'sign_in.failed',
      ...(outcome.user === undefined ? {} : { accountId: outcome.user.accountId, target: outcome.user.id }),
      detail,
    });
  if (!outcome.succeeded) return write();
  return asActor({ ...(currentActor() ?? { kind: 'user' }), kind: 'user', id: outcome.user.id, label: outcome.user.email }, write);
}

/** Something a user did to their own access: signed out (here or everywhere), asked for a reset link, new recovery codes, a confirmation link again. */
export type AccessEvent = 'sign_out' | 'sign_out.everywhere' | 'password_reset.requested' | 'two_factor.recovery_codes_replaced' | 'email_confirmation.resent';

export async function recordAccessEvent(q: Queryable, action: AccessEvent, user: SignInUser | undefined, detail?: Record<string, string | number | boolean | null>): Promise<void> {
  await recordAuditEvent(q, { action, ...(user === undefined ? {} : { accountId: user.accountId, target: user.id }), ...(detail === undefined ? {} : { detail }) });
}

// Beside the audit log's entry, every sign-in is also a structured log line (SignInEvents, which the
// dashboard service is given), for the operator's log pipeline: who, how, from where, the reason in words.

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
  /** Why the audit log has no entry for this refusal (its write failed; the refusal stands). */
  auditEntryNotWritten?: string;
}

export type SignInEvents = (event: SignInEvent) => void;

/** The default: one JSON line per sign-in to `log`. */
export function logSignIns(log: (line: string) => void): SignInEvents {
  return (e) => log(JSON.stringify({ level: e.outcome === 'success' ? 'info' : 'warn', event: 'dashboard_sign_in', ...e }));
}
