// Sign-ins under way, kept server-side: the state (only its hash), the nonce and the PKCE verifier,
// bound to the browser that started them by a random value in a short-lived HttpOnly cookie. The
// callback takes its row out (single use): a replayed state, one that was never issued, one that
// expired, or one brought by another browser finds nothing it may use.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { Database } from '../record/database.js';
import { sha256 } from './sessions.js';
import type { SsoChecks } from './sso-provider.js';
import { SsoRefusal } from './sso-provider.js';

/** Time to sign in at the provider. */
export const SSO_LOGIN_MINUTES = 10;
export const SSO_BROWSER_COOKIE = 'tg_sso';

const AGAIN = 'Start again from the sign-in page.';

export class SsoLogins {
  constructor(private readonly opts: { db: Database; secureCookie: boolean }) {}

  /** Keeps the checks of a new sign-in and binds it to this browser (a cookie on /sso). */
  async keep(ctx: Context, checks: SsoChecks): Promise<void> {
    const browser = randomBytes(32).toString('base64url');
    await this.opts.db.query(`INSERT INTO sso_logins (state_hash, browser_hash, nonce, code_verifier, expires_at) VALUES ($1, $2, $3, $4, now() + interval '${SSO_LOGIN_MINUTES} minutes')`, [
      sha256(checks.state),
      sha256(browser),
      checks.nonce,
      checks.codeVerifier,
    ]);
    if (this.opts.secureCookie) ctx.cookies.secure = true;
    // Lax: the provider's redirect back is a top-level GET navigation, which carries it.
    ctx.cookies.set(SSO_BROWSER_COOKIE, browser, { httpOnly: true, sameSite: 'lax', secure: this.opts.secureCookie, path: '/sso', maxAge: SSO_LOGIN_MINUTES * 60_000, overwrite: true });
  }

  /** Takes the sign-in the callback's state names out of the record (once), if this browser started it. */
  async take(ctx: Context, state: string | undefined): Promise<SsoChecks> {
    if (state === undefined || state === '') throw new SsoRefusal(400, `The provider's answer carries no state, so it cannot be matched to a sign-in started here. ${AGAIN}`);
    const r = await this.opts.db.query<{ browser_hash: string; nonce: string; code_verifier: string; live: boolean }>(
      'DELETE FROM sso_logins WHERE state_hash = $1 RETURNING browser_hash, nonce, code_verifier, expires_at > now() AS live',
      [sha256(state)],
    );
    const row = r.rows[0];
    if (row === undefined) throw new SsoRefusal(400, `This sign-in was used already, or was not started on this Tollgate. ${AGAIN}`);
    if (!row.live) throw new SsoRefusal(400, `This sign-in took longer than ${SSO_LOGIN_MINUTES} minutes and expired. ${AGAIN}`);
    const browser = ctx.cookies.get(SSO_BROWSER_COOKIE) ?? '';
    const a = Buffer.from(sha256(browser));
    const b = Buffer.from(row.browser_hash);
    if (browser === '' || !timingSafeEqual(a, b)) throw new SsoRefusal(400, `This sign-in was started in another browser. ${AGAIN}`);
    return { state, nonce: row.nonce, codeVerifier: row.code_verifier };
  }

  /** The browser's binding is spent once the callback ran, whatever came of it. */
  forget(ctx: Context): void {
    ctx.cookies.set(SSO_BROWSER_COOKIE, '', { httpOnly: true, sameSite: 'lax', secure: this.opts.secureCookie, path: '/sso', expires: new Date(0), overwrite: true });
  }
}
