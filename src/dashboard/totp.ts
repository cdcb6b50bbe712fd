// TOTP (RFC 6238) for dashboard sign-in, through the otpauth library: 6 digits, 30-second steps, SHA-1
// (what every authenticator app accepts), one step of clock drift either way.
import { Secret, TOTP } from 'otpauth';

const PERIOD = 30;
/** A base32 secret of 160 bits as this module makes them. */
export const TOTP_SECRET = /^[A-Z2-7]{32}$/;

export interface TotpEnrolment {
  /** Base32, for typing into an app by hand. */
  secret: string;
  /** otpauth:// URI, for apps that take a link or a QR code made from it. */
  uri: string;
}

function totp(secret: string, label = 'Tollgate'): TOTP {
  return new TOTP({ issuer: 'Tollgate', label, algorithm: 'SHA1', digits: 6, period: PERIOD, secret: Secret.fromBase32(secret) });
}

export function newTotpEnrolment(email: string): TotpEnrolment {
  const secret = new Secret({ size: 20 }).base32;
  return { secret, uri: totp(secret, email).toString() };
}

/** The time step the code belongs to (now, or one either side), or undefined when it matches none. */
export function checkTotp(secret: string, code: string, now: number = Date.now()): number | undefined {
  if (!/^\d{6}$/.test(code) || !TOTP_SECRET.test(secret)) return undefined;
  const delta = totp(secret).validate({ token: code, timestamp: now, window: 1 });
  return delta === null ? undefined : Math.floor(now / 1000 / PERIOD) + delta;
}

/** The current code of a secret (tests, and nothing else in the product). */
export function totpCode(secret: string, now: number = Date.now()): string {
  return totp(secret).generate({ timestamp: now });
}
