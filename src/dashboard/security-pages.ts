// The Security page: two-factor sign-in turned on (a secret for the authenticator app, confirmed by a
// code and the password), its recovery codes (shown once, made anew with the password and a code), and
// turning it off (the password and a code or a recovery code).
import { html, type Html } from './html.js';
import { errorBox, layout } from './pages.js';
import type { Session } from './sessions.js';
import type { TotpEnrolment } from './totp.js';
import { RECOVERY_CODE_COUNT } from './two-factor.js';

const csrf = (s: Session): Html => html`<input type="hidden" name="csrf" value="${s.csrfToken}">`;

const passwordInput = html`<label>Your password <input type="password" name="password" autocomplete="current-password" required></label>`;

const adminNote = (session: Session, requiredForAdmin: boolean): Html | string =>
  requiredForAdmin && session.user.role === 'admin' ? html`<p class="note">This Tollgate requires two-factor sign-in for the admin pages.</p>` : '';

export type TwoFactorState =
  /** Off: the enrolment form with a fresh secret (or the one just tried, after an error). */
  | { on: false; enrolment: TotpEnrolment }
  /** On: how many recovery codes are left. */
  | { on: true; codesLeft: number };

export function twoFactorPage(session: Session, state: TwoFactorState, opts: { error?: string; notice?: string; requiredForAdmin?: boolean } = {}): Html {
  const top = html`${adminNote(session, opts.requiredForAdmin === true)}${opts.notice === undefined ? '' : html`<p class="ok" role="status">${opts.notice}</p>`}${errorBox(opts.error)}`;
  if (!state.on) {
    const e = state.enrolment;
    return layout(
      'Two-factor sign-in',
      session,
      html`<h1>Turn on two-factor sign-in</h1>${top}<p>Signing in will ask for a code from an app on your phone as well as your password, so a stolen password alone no longer opens your account.</p>
<div class="card" id="enrol"><h2>1. Add Tollgate to your authenticator app</h2>
<p>In any authenticator app (time-based codes, 6 digits), add an account with this secret:</p>
<p><code id="totp-secret" class="rid">${e.secret}</code> <button type="button" class="copy" data-copy="totp-secret">Copy</button></p>
${e.uri === '' ? '' : html`<p class="note">On the phone itself, this link opens the app: <a href="${e.uri}">add to authenticator</a>.</p>`}
<h2>2. Confirm with a code and your password</h2>
<form method="post" action="/account/two-factor">${csrf(session)}<input type="hidden" name="secret" value="${e.secret}">
<label>Code from the app <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="\\d{6}" maxlength="6" required></label>
${passwordInput}
<button>Turn on</button></form>
<p class="note">Next you get ${RECOVERY_CODE_COUNT} recovery codes: each signs you in once if the phone is lost. Other sessions of yours are signed out.</p></div>`,
    );
  }
  const left = state.codesLeft;
  return layout(
    'Two-factor sign-in',
    session,
    html`<h1>Two-factor sign-in</h1>${top}<p class="ok" role="status">Two-factor sign-in is on: signing in asks for a code from your authenticator app.</p>
<div class="card" id="recovery-codes"><h2>Recovery codes</h2>
<p><strong>${left} of ${RECOVERY_CODE_COUNT}</strong> unused. Each works once in place of a code: to sign in, to reset your password, or to turn two-factor sign-in off.</p>
${left <= 3 ? html`<p class="warn" role="note">${left === 0 ? 'You have no recovery codes left.' : 'You are running out of recovery codes.'} Make new ones so a lost phone does not lock you out.</p>` : ''}
<form method="post" action="/account/two-factor/recovery-codes">${csrf(session)}
<label>Code from the app <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="\\d{6}" maxlength="6" required></label>
${passwordInput}
<button>Make new recovery codes</button></form><p class="note">The old ones stop working; the new ones are shown once.</p></div>
<div class="card" id="turn-off"><h2>Turn two-factor sign-in off</h2><p>Signing in will ask for your password only.</p>
<form method="post" action="/account/two-factor/off">${csrf(session)}
<label>Code from the app, or a recovery code <input name="code" autocomplete="one-time-code" autocapitalize="off" spellcheck="false" maxlength="24" required></label>
${passwordInput}
<button>Turn off</button></form></div>`,
  );
}

/** The recovery codes, shown this once (after turning two-factor sign-in on, or making new ones). */
export function recoveryCodesPage(session: Session, codes: readonly string[], made: 'enabled' | 'replaced'): Html {
  return layout(
    'Your recovery codes',
    session,
    html`<h1>Save your recovery codes</h1><p class="ok" role="status">${made === 'enabled' ? 'Two-factor sign-in is on.' : 'New recovery codes are ready; the old ones no longer work.'}</p>
<div class="secret words" role="note"><p><strong>They are shown only now.</strong> Keep them apart from your phone: in a password manager, or printed. Each works once, in place of a code from the app.</p>
<ol class="codes" id="recovery-code-list">${codes.map((c) => html`<li><code>${c}</code></li>\n`)}</ol>
<p><button type="button" class="copy" data-copy="recovery-code-list">Copy all</button></p></div>
<p><a href="/account/two-factor">I have saved them</a></p>`,
  );
}
