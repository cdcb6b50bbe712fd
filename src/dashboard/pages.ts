// Server-rendered pages: plain HTML and one stylesheet inline, no script needed to use them.
import { formatUsd } from '../billing/money.js';
import { html, trusted, type Html } from './html.js';
import type { KeyView } from './keys.js';
import { accountLabel } from './memberships.js';
import { can, type Permission } from './roles.js';
import type { Session } from './sessions.js';
import type { RateLimits } from '../accounts/rate-limits.js';

// One small stylesheet, inline (no build step, no CDN): a dark bar, white cards, quiet tables, one accent.
const STYLE = `:root{--ink:#1b1f24;--muted:#5b6572;--line:#e2e6ea;--bg:#f5f6f8;--accent:#2456d6;--accent-ink:#fff}
*{box-sizing:border-box}body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:var(--ink);background:var(--bg)}
a{color:var(--accent)}h1{font-size:1.6rem;margin:1.2rem 0 .8rem;overflow-wrap:anywhere}h2{font-size:1.15rem;margin:1.6rem 0 .6rem}
header{background:#111827;color:#fff;padding:.55rem 1.25rem}header .bar{display:flex;gap:.8rem;align-items:center;flex-wrap:wrap}
header strong{font-size:1.05rem;letter-spacing:.02em;margin-right:.5rem}header a{color:#d1d5db;text-decoration:none}header a:hover{color:#fff}
header nav{display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;margin-top:.5rem;padding-top:.45rem;border-top:1px solid #1f2937}header .who{margin-left:auto;color:#9ca3af;font-size:.9rem}
header button{color:#e5e7eb;background:transparent;border:1px solid #4b5563;border-radius:6px;padding:.2rem .7rem;font-size:.85rem}header button:hover{border-color:#e5e7eb}
main{max-width:66rem;margin:1rem auto 3rem;padding:0 1.25rem}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line);border-radius:8px;overflow:hidden;font-size:.92rem}
th,td{text-align:left;padding:.5rem .55rem;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#fafbfc;color:var(--muted);font-weight:600;font-size:.72rem;text-transform:uppercase;letter-spacing:.03em}
tr:last-child td{border-bottom:0}td time{white-space:nowrap}
form.inline{display:inline}label{display:block;margin:.5rem 0;color:var(--ink)}
input,select,textarea{font:inherit;padding:.35rem .5rem;border:1px solid #c9d0d8;border-radius:6px;background:#fff}
input:focus,select:focus,textarea:focus{outline:2px solid var(--accent);outline-offset:0;border-color:var(--accent)}
button{font:inherit;padding:.38rem .9rem;cursor:pointer;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:var(--accent-ink)}
button:hover{filter:brightness(1.08)}
.error{background:#fdecec;color:#8a1010;padding:.6rem .8rem;border-left:4px solid #c01818;border-radius:4px}
.ok{background:#e7f6ec;padding:.6rem .8rem;border-left:4px solid #1a7f37;border-radius:4px}
.secret{background:#fff8d6;padding:.8rem;border-left:4px solid #c9a000;border-radius:4px;word-break:break-all}
.revoked{color:#8b95a1}meter.bar{display:block;width:100%;max-width:12rem;height:.6rem}
.rid{user-select:all;font:.78em ui-monospace,SFMono-Regular,Menlo,monospace;white-space:nowrap}.refused{color:#8a1010}
form.filters label{display:inline-block;margin-right:.8rem}nav a{margin-right:.5rem}
.num{text-align:right;font-variant-numeric:tabular-nums}.note{color:var(--muted)}
.card{background:#fff;padding:1rem 1.2rem;margin:1rem 0;border:1px solid var(--line);border-radius:8px;overflow-wrap:anywhere}
textarea{width:100%;max-width:40rem}input{max-width:100%}.actions a{white-space:nowrap}
.big{font-size:2rem;font-weight:650;letter-spacing:-.01em}h3{font-size:1rem;margin:1rem 0 .4rem}
ul.team-members{padding-left:1.2rem;margin:.3rem 0}ul.team-members li{margin:.3rem 0}ul.team-members button{padding:.1rem .55rem;font-size:.8rem;margin-left:.4rem}
ol.codes{columns:2 11rem;column-gap:2.5rem;max-width:26rem;margin:.8rem 0;padding-left:2.2rem;font:1rem/1.9 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:nowrap}.secret.words{word-break:normal}.warn{background:#fff4e5;padding:.6rem .8rem;border-left:4px solid #d97706;border-radius:4px}
dl.quote{display:grid;grid-template-columns:auto auto;gap:.2rem 1rem;max-width:20rem}dl.quote dd{margin:0;text-align:right;font-variant-numeric:tabular-nums}
form.switcher{display:flex;gap:.35rem;align-items:center;margin:0}form.switcher select{background:#1f2937;color:#f9fafb;border-color:#4b5563;max-width:16rem;padding:.2rem .4rem;font-size:.9rem}
a.sso{display:inline-block;padding:.5rem 1.1rem;border-radius:6px;background:var(--accent);color:var(--accent-ink);text-decoration:none;font-weight:600}
header a.new-org{font-size:.85rem;color:#9ca3af}.role{display:inline-block;font-size:.75rem;padding:.05rem .45rem;border-radius:999px;background:#eef2ff;color:#3730a3;text-transform:capitalize;white-space:nowrap}
.role.owner{background:#fef3c7;color:#92400e}.role.billing{background:#ecfdf5;color:#065f46}.role.member{background:#f3f4f6;color:#374151}
.danger{border-color:#b91c1c;background:#b91c1c}.card.danger-zone{border-color:#f3c4c4}.card>h2:first-child{margin-top:.1rem}.row{display:flex;gap:.5rem;flex-wrap:wrap;align-items:end}.row label{margin:0}
.row>.card{flex:1 1 18rem;margin:.5rem 0}.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
@media(max-width:40rem){main{padding:0 .6rem}header .bar{gap:.5rem}header .who{margin-left:0}.card{padding:.8rem}form.switcher select{max-width:11rem}
table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:100%}table.stack thead{display:none}
table.stack tr{border-bottom:1px solid var(--line);padding:.35rem 0}table.stack tr:last-child{border-bottom:0}
table.stack td{border:0;padding:.2rem .7rem;text-align:right;overflow-wrap:anywhere}table.stack td::before{content:attr(data-label);float:left;margin-right:1rem;color:var(--muted);font-size:.8rem}
table.stack meter.bar{margin-left:auto}
table:not(.stack){display:block;overflow-x:auto;background:linear-gradient(90deg,#fff 30%,#fff0) left/2rem 100% no-repeat local,linear-gradient(270deg,#fff 30%,#fff0) right/2rem 100% no-repeat local,radial-gradient(farthest-side at 0 50%,#0003,#0000) left/.8rem 100% no-repeat scroll,radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/.8rem 100% no-repeat scroll,#fff}}`;

/** Whether the session's role in the account it acts on has the permission (what a page offers). */
export const mayDo = (session: Session, permission: Permission): boolean => session.member !== undefined && can(session.member.role, permission);

/** The main navigation: each page with the permission it needs (the routes check the same), organizations' pages apart. */
const NAV: ReadonlyArray<{ href: string; label: string; permission: Permission; organizationOnly?: boolean }> = [
  { href: '/keys', label: 'Keys', permission: 'keys.own' },
  { href: '/usage', label: 'Usage', permission: 'usage.own' },
  { href: '/models', label: 'Models', permission: 'models.view' },
  { href: '/balance', label: 'Balance', permission: 'billing.view' },
  { href: '/refunds', label: 'Refunds', permission: 'refunds.request' },
  { href: '/members', label: 'Members', permission: 'members.view', organizationOnly: true },
  { href: '/teams', label: 'Teams', permission: 'teams.view', organizationOnly: true },
  { href: '/organization', label: 'Settings', permission: 'members.view', organizationOnly: true },
  { href: '/audit-log', label: 'Audit log', permission: 'audit.view', organizationOnly: true },
];

/** Where a signed-in member starts: their keys, or (a role without keys) the usage. */
export const homeOf = (session: Session): string => (mayDo(session, 'keys.own') ? '/keys' : '/usage');

/** The account switcher: every account the user belongs to, the current one chosen; a form, so it works without script. */
function switcher(session: Session): Html {
  const current = session.member?.accountId;
  return html`<form class="switcher" method="post" action="/account/switch"><input type="hidden" name="csrf" value="${session.csrfToken}"><label class="sr" for="account-switch">Account</label><select id="account-switch" name="account_id" data-autosubmit>${session.memberships.map(
    (m) => html`<option value="${m.accountId}"${m.accountId === current ? html` selected` : ''}>${accountLabel(m)} · ${m.role}</option>`,
  )}</select><button>Switch</button></form><a class="new-org" href="/organizations/new">+ Organization</a>`;
}

export function layout(title: string, session: Session | undefined, body: Html): Html {
  const organization = session?.member?.organization !== undefined;
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · Tollgate</title><style>${trusted(STYLE)}</style><script src="/assets/dashboard.js" defer></script></head><body>
<header><div class="bar"><strong>Tollgate</strong>${
    session === undefined
      ? ''
      : html`${switcher(session)}<span class="who">${session.user.email}</span>
<form class="inline" method="post" action="/sign-out"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Sign out</button></form>
<form class="inline" method="post" action="/sign-out-everywhere"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Sign out everywhere</button></form>`
  }</div>${
    session === undefined
      ? ''
      : html`<nav aria-label="Main">${NAV.filter((n) => mayDo(session, n.permission) && (organization || n.organizationOnly !== true)).map((n) => html`<a href="${n.href}">${n.label}</a> `)}${
          session.user.role === 'admin' ? html`<a href="/admin">Admin</a> <a href="/admin/audit-log">Audit log (all)</a> ` : ''
        }<a href="/account/two-factor">Security</a></nav>`
  }</header><main>${body}</main></body></html>`;
}

export const errorBox = (error?: string): Html | string => (error === undefined ? '' : html`<p class="error" role="alert">${error}</p>`);

/** `sso`: the company's provider, when SSO is configured (its button comes first). */
export function signInPage(signUpOpen: boolean, error?: string, email = '', notice?: string, sso?: { name: string; href: string }): Html {
  return layout(
    'Sign in',
    undefined,
    html`<h1>Sign in</h1>${notice === undefined ? '' : html`<p class="ok" role="status">${notice}</p>`}${errorBox(error)}${
      sso === undefined ? '' : html`<p><a class="sso" href="${sso.href}">Sign in with ${sso.name}</a></p><p class="note">Or with your e-mail and password:</p>`
    }<form method="post" action="/sign-in">
<label>E-mail <input type="email" name="email" autocomplete="username" required value="${email}"></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<label>Authenticator code or a recovery code (only if you turned on two-factor sign-in) <input name="code" autocomplete="one-time-code" autocapitalize="off" spellcheck="false" maxlength="24"></label>
<button>Sign in</button></form><p><a href="/password-reset">Forgot your password?</a></p>${signUpOpen ? html`<p>New here? <a href="/sign-up">Create an account</a>.</p>` : ''}`,
  );
}

export function signUpPage(error?: string, email = ''): Html {
  return layout(
    'Create an account',
    undefined,
    html`<h1>Create an account</h1>${errorBox(error)}<form method="post" action="/sign-up">
<label>E-mail <input type="email" name="email" autocomplete="username" required value="${email}"></label>
<label>Password (at least 10 characters) <input type="password" name="password" autocomplete="new-password" minlength="10" required></label>
<button>Create account</button></form><p>Have an account? <a href="/sign-in">Sign in</a>.</p>`,
  );
}

export const usd = (micros: number | undefined): string => (micros === undefined ? '—' : `$${formatUsd(micros)}`);
const usdInput = (micros: number | undefined): string => (micros === undefined ? '' : formatUsd(micros));
const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** A key's limits in a few words: its own, else the account's default (marked so). */
function limitsText(own: RateLimits | undefined, defaults: RateLimits): Html {
  const part = (v: number | undefined, d: number | undefined, unit: string): string | undefined =>
    v !== undefined ? `${v} ${unit}` : d !== undefined ? `${d} ${unit} (default)` : undefined;
  const parts = [
    part(own?.requestsPerMinute, defaults.requestsPerMinute, 'requests/min'),
    part(own?.tokensPerMinute, defaults.tokensPerMinute, 'tokens/min'),
    part(own?.concurrentRequests, defaults.concurrentRequests, 'at once'),
  ].filter((p): p is string => p !== undefined);
  return parts.length === 0 ? html`<span class="note">none</span>` : html`${parts.join(' · ')}`;
}

/** The three rate-limit inputs, filled with `limits`; `none` says what empty means. */
function limitInputs(limits: RateLimits | undefined, none: string): Html {
  const v = (n: number | undefined): string => (n === undefined ? '' : String(n));
  return html`<label>Requests per minute (${none}) <input name="requests_per_minute" inputmode="numeric" pattern="\\d{1,13}" value="${v(limits?.requestsPerMinute)}"></label>
<label>Tokens per minute, input + output (${none}) <input name="tokens_per_minute" inputmode="numeric" pattern="\\d{1,13}" value="${v(limits?.tokensPerMinute)}"></label>
<label>Requests at once (${none}) <input name="concurrent_requests" inputmode="numeric" pattern="\\d{1,13}" value="${v(limits?.concurrentRequests)}"></label>`;
}

/** The key's default cost ceiling per request; what the header does with it is said beside it. */
function maxCostInput(micros: number | undefined): Html {
  return html`<label>Max cost per request, USD (empty: none) <input name="max_cost_per_request_usd" inputmode="decimal" pattern="\\d{1,10}(\\.\\d{1,6})?" value="${usdInput(micros)}"></label>
<p class="note">A request whose worst case is above it gets a lower output limit (or a 402 when even its prompt is dearer); the x-tollgate-max-cost-usd header can lower it for one request, never raise it.</p>`;
}

export function keysPage(
  session: Session,
  keys: KeyView[],
  opts: { error?: string; notice?: string; reveal?: { name: string; secret: string }; accountLimits?: RateLimits; teams?: TeamChoice[] } = {},
): Html {
  const defaults = opts.accountLimits ?? {};
  const csrf = html`<input type="hidden" name="csrf" value="${session.csrfToken}">`;
  // Owners and admins see every member's keys, so who made each; a member sees only their own.
  const everyone = mayDo(session, 'keys.all');
  const teams = opts.teams ?? [];
  const anyTeams = teams.length > 0 || keys.some((k) => k.team !== undefined);
  const madeBy = (k: KeyView): Html | string => (everyone ? html`<td data-label="Made by">${k.owner?.email ?? html`<span class="note">the operator</span>`}</td>` : '');
  const bar = (spent: number, cap: number | undefined, label: string): Html =>
    cap === undefined
      ? html`${usd(spent)} <span class="note">no cap</span>`
      : html`${usd(spent)} of ${usd(cap)}<meter class="bar" min="0" max="${cap}" low="${Math.floor(cap * 0.8)}" high="${Math.floor(cap * 0.8)}" optimum="0" value="${Math.min(spent, cap)}" aria-label="${label}: ${Math.floor((Math.min(spent, cap) * 100) / Math.max(cap, 1))}% used"></meter>`;
  const rows = keys.map(
    (k) => html`<tr class="${k.state}"><td data-label="Name">${k.name}</td><td data-label="Key"><code>${k.displayHint}</code></td><td data-label="Created">${day(k.createdAt)}</td><td data-label="State">${k.state}</td>
${madeBy(k)}${anyTeams ? html`<td data-label="Team">${k.team?.name ?? html`<span class="note">none</span>`}</td>` : ''}<td data-label="This month">${bar(k.monthSpent, k.monthlyCap, 'This month against the monthly cap')}</td><td data-label="Lifetime">${bar(k.lifetimeSpent, k.lifetimeCap, 'Lifetime against the lifetime cap')}</td><td data-label="Rate limits">${limitsText(k.rateLimits, defaults)}</td><td data-label="Last used">${k.lastUsedAt === undefined ? 'never' : day(k.lastUsedAt)}</td>
<td class="actions">${k.state === 'active' ? html`<a href="/keys/${k.id}/edit">Edit caps and limits</a> · <a href="/keys/${k.id}/revoke">Revoke</a>` : ''}</td></tr>`,
  );
  return layout(
    'API keys',
    session,
    html`<h1>API keys</h1>${everyone || session.member?.organization === undefined ? '' : html`<p class="note">You see the keys you made in ${session.member.organization}; owners and admins see everyone's.</p>`}${opts.notice === undefined ? '' : html`<p class="ok" role="status">${opts.notice}</p>`}${errorBox(opts.error)}${
      session.user.emailVerified
        ? ''
        : html`<div class="card" role="note"><p><strong>Confirm your e-mail address.</strong> We mailed a link to ${session.user.email}; follow it to create keys and add money.</p>
<form method="post" action="/resend-verification">${csrf}<button>Send the link again</button></form></div>`
    }${
      opts.reveal === undefined
        ? ''
        : html`<div class="secret" role="status"><p>Your new key <strong>${opts.reveal.name}</strong>. Copy it now: it is shown only this once.</p>
<p><code id="new-key" class="rid">${opts.reveal.secret}</code> <button type="button" class="copy" data-copy="new-key">Copy</button></p></div>`
    }
${
  keys.length === 0
    ? html`<p>No keys yet. Create one below to call the API.</p>`
    : html`<table class="stack"><thead><tr><th>Name</th><th>Key</th><th>Created</th><th>State</th>${everyone ? html`<th>Made by</th>` : ''}${anyTeams ? html`<th>Team</th>` : ''}<th>This month</th><th>Lifetime</th><th>Rate limits</th><th>Last used</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
}
${
  session.user.emailVerified
    ? html`<h2>Create a key</h2><form method="post" action="/keys">${csrf}
<label>Name <input name="name" maxlength="100"></label>
${teams.length === 0 ? '' : teamSelect(teams, undefined)}
<label>Monthly cap, USD (optional) <input name="monthly_cap_usd" inputmode="decimal" pattern="\\d{1,10}(\\.\\d{1,6})?"></label>
<label>Lifetime cap, USD (optional) <input name="lifetime_cap_usd" inputmode="decimal" pattern="\\d{1,10}(\\.\\d{1,6})?"></label>
${maxCostInput(undefined)}
${limitInputs(undefined, 'empty: the default below')}
<button>Create key</button></form>`
    : ''
}
<h2>Default rate limits for keys</h2><p class="note">They apply to every key that sets no limit of its own; a refused request gets a 429 with the time to wait.</p>
${
  mayDo(session, 'keys.defaults')
    ? html`<form method="post" action="/keys/rate-limits">${csrf}
${limitInputs(defaults, 'empty: none')}
<button>Save default limits</button></form>`
    : html`<p id="default-limits">${limitsText(undefined, defaults)} <span class="note">(set by the account's owners and admins)</span></p>`
}`,
  );
}

/** A team a key may be put in (the teams the acting member may use). */
export interface TeamChoice {
  id: string;
  name: string;
}

/** The key's team: its requests draw from the team's budgets too. */
function teamSelect(teams: readonly TeamChoice[], chosen: string | undefined): Html {
  return html`<label>Team <select name="team_id"><option value="">No team</option>${teams.map((t) => html`<option value="${t.id}"${t.id === chosen ? html` selected` : ''}>${t.name}</option>`)}</select></label>`;
}

export function editCapsPage(session: Session, k: KeyView, error?: string, teams: readonly TeamChoice[] = []): Html {
  return layout(
    'Edit caps',
    session,
    html`<h1>Caps of ${k.name} <code>${k.displayHint}</code></h1>${errorBox(error)}
<form method="post" action="/keys/${k.id}/caps"><input type="hidden" name="csrf" value="${session.csrfToken}">
<label>Monthly cap, USD (empty: none) <input name="monthly_cap_usd" inputmode="decimal" value="${usdInput(k.monthlyCap)}"></label>
<label>Lifetime cap, USD (empty: none) <input name="lifetime_cap_usd" inputmode="decimal" value="${usdInput(k.lifetimeCap)}"></label>
<button>Save caps</button> <a href="/keys">Cancel</a></form>
<h2>Cost ceiling per request</h2><form method="post" action="/keys/${k.id}/max-cost"><input type="hidden" name="csrf" value="${session.csrfToken}">
${maxCostInput(k.maxCostPerRequest)}
<button>Save ceiling</button> <a href="/keys">Cancel</a></form>
<h2>Rate limits</h2><form method="post" action="/keys/${k.id}/rate-limits"><input type="hidden" name="csrf" value="${session.csrfToken}">
${limitInputs(k.rateLimits, "empty: the account's default")}
<button>Save rate limits</button> <a href="/keys">Cancel</a></form>${
      teams.length === 0 && k.team === undefined
        ? ''
        : html`<h2>Team</h2><p class="note">Its requests are admitted only while the team's budgets have room too; what it spent stays with the team it was in.</p><form method="post" action="/keys/${k.id}/team"><input type="hidden" name="csrf" value="${session.csrfToken}">
${teamSelect(teams.some((t) => t.id === k.team?.id) || k.team === undefined ? teams : [...teams, k.team], k.team?.id)}
<button>Save team</button> <a href="/keys">Cancel</a></form>`
    }`,
  );
}

export function revokePage(session: Session, k: KeyView): Html {
  return layout(
    'Revoke key',
    session,
    html`<h1>Revoke ${k.name} <code>${k.displayHint}</code>?</h1>
<p>Every call with this key will be refused (401) from now on. This cannot be undone.</p>
<form method="post" action="/keys/${k.id}/revoke"><input type="hidden" name="csrf" value="${session.csrfToken}">
<button>Revoke key</button> <a href="/keys">Cancel</a></form>`,
  );
}

export function errorPage(session: Session | undefined, status: number, message: string): Html {
  return layout('Error', session, html`<h1>${status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Something is wrong'}</h1>${errorBox(message)}<p><a href="/">Back to the dashboard</a></p>`);
}

export function resetRequestPage(sent: boolean, error?: string): Html {
  return layout(
    'Reset your password',
    undefined,
    html`<h1>Reset your password</h1>${errorBox(error)}${
      sent
        ? html`<p class="ok" role="status">If that address has an account, a link to choose a new password is on its way. It works for an hour.</p>`
        : html`<form method="post" action="/password-reset"><label>E-mail <input type="email" name="email" autocomplete="username" required></label><button>Send me a link</button></form>`
    }<p><a href="/sign-in">Back to sign-in</a></p>`,
  );
}

/** The new password; with two-factor sign-in on, a code or a recovery code too (the mailbox alone is one factor). */
export function resetPasswordPage(token: string, state: { valid: boolean; secondFactor: boolean }, error?: string): Html {
  return layout(
    'Choose a new password',
    undefined,
    state.valid
      ? html`<h1>Choose a new password</h1>${errorBox(error)}<form method="post" action="/password-reset/${token}">
<label>New password (at least 10 characters) <input type="password" name="password" autocomplete="new-password" minlength="10" required></label>${
          state.secondFactor
            ? html`<label>Authenticator code or a recovery code <input name="code" autocomplete="one-time-code" autocapitalize="off" spellcheck="false" maxlength="24" required></label>
<p class="note">This account has two-factor sign-in, so a new password needs a code from your authenticator app or one of your recovery codes. Lost both? Ask the operator of this Tollgate to turn two-factor sign-in off for your address; then ask for a new link.</p>`
            : ''
        }<button>Set password</button></form>`
      : html`<h1>This link has expired</h1><p>It was used already or is over an hour old. <a href="/password-reset">Ask for a new one</a>.</p>`,
  );
}

export function confirmedPage(session: Session | undefined): Html {
  return layout(
    'Address confirmed',
    session,
    html`<h1>Your address is confirmed</h1><p class="ok" role="status">You can now create API keys and add money.</p><p><a href="${session === undefined ? '/sign-in' : '/keys'}">${session === undefined ? 'Sign in' : 'Go to your keys'}</a></p>`,
  );
}
