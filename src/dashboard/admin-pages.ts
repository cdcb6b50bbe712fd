// The admin pages (admin role): accounts and balances, manual credit, refund tickets, keys revoked on a
// holder's behalf, top-ups, and reconciliation.
import { randomBytes } from 'node:crypto';
import type { Account, ApiKeyRecord } from '../accounts/account-store.js';
import type { ReconciliationReport } from '../record/reconcile.js';
import { formatCents } from '../top-ups/quote.js';
import type { TopUpView } from '../top-ups/service.js';
import { html, type Html } from './html.js';
import { errorBox, layout, usd } from './pages.js';
import type { RefundTicket } from './refund-tickets.js';
import type { MemberLine } from './memberships.js';
import type { Session } from './sessions.js';

const when = (d: Date | number): string => new Date(d).toISOString().slice(0, 16).replace('T', ' ');
const csrf = (s: Session): Html => html`<input type="hidden" name="csrf" value="${s.csrfToken}">`;

export interface AccountLine {
  account: Account;
  balance: number;
  held: number;
}

export function adminHome(session: Session, data: { accounts: AccountLine[]; tickets: RefundTicket[]; report?: ReconciliationReport; flash?: string; error?: string }): Html {
  return layout(
    'Admin',
    session,
    html`<h1>Admin</h1>${data.flash === undefined ? '' : html`<p class="ok" role="status">${data.flash}</p>`}${errorBox(data.error)}
<h2>Refund requests waiting</h2>${
      data.tickets.length === 0
        ? html`<p class="note">None waiting.</p>`
        : html`<table><thead><tr><th>Asked</th><th>Account</th><th>Request id</th><th class="num">Cost</th><th>Reason</th><th></th></tr></thead><tbody>${data.tickets.map(
            (t) => html`<tr><td>${when(t.createdAt)}</td><td><a href="/admin/accounts/${t.accountId}">${t.accountId}</a></td><td><code class="rid">${t.requestId}</code>${t.modelRefused ? html` <strong>model refused</strong>` : ''}</td>
<td class="num">${usd(t.cost)}</td><td>${t.reason}</td><td><form class="inline" method="post" action="/admin/refund-tickets/${t.id}/approve">${csrf(session)}<button>Approve</button></form>
<form class="inline" method="post" action="/admin/refund-tickets/${t.id}/decline">${csrf(session)}<input name="note" placeholder="Why not" aria-label="Why it is declined"><button>Decline</button></form></td></tr>`,
          )}</tbody></table>`
    }
<h2>Accounts</h2><table class="stack"><thead><tr><th>Account</th><th>Name</th><th>Created</th><th class="num">Balance</th><th class="num">Held</th></tr></thead><tbody>${data.accounts.map(
      (a) => html`<tr><td data-label="Account"><a href="/admin/accounts/${a.account.id}">${a.account.id}</a></td><td data-label="Name">${a.account.name}</td><td data-label="Created">${when(a.account.createdAt)}</td><td data-label="Balance" class="num">${usd(a.balance)}</td><td data-label="Held" class="num">${usd(a.held)}</td></tr>`,
    )}</tbody></table>
<h2>Reconciliation</h2>${
      data.report === undefined
        ? html`<form method="post" action="/admin/reconciliation">${csrf(session)}<button>Compare the record and the hot path now</button></form>`
        : html`<p>${data.report.accounts} accounts compared: ${data.report.accountsDiffering === 0 ? html`<strong>no difference</strong>` : html`<strong>${data.report.accountsDiffering} differ</strong>, ${usd(data.report.totalDifference)} in all`}.</p>`
    }`,
  );
}

/** The account's members; a locked-out one's two-factor sign-in can be turned off for them. */
function userRows(session: Session, accountId: string, users: MemberLine[]): Html {
  if (users.length === 0) return html`<p class="note">No one signs in to this account.</p>`;
  return html`<table class="stack" id="users"><thead><tr><th>E-mail</th><th>Role</th><th>Two-factor sign-in</th><th></th></tr></thead><tbody>${users.map(
    (u) => html`<tr><td data-label="E-mail">${u.email}</td><td data-label="Role">${u.role}</td><td data-label="Two-factor sign-in">${u.totpEnabled ? 'on' : 'off'}</td><td>${
      u.totpEnabled
        ? html`<form class="inline" method="post" action="/admin/accounts/${accountId}/users/${u.userId}/clear-two-factor">${csrf(session)}<button>Turn off two-factor sign-in</button></form>`
        : ''
    }</td></tr>`,
  )}</tbody></table><p class="note">Turn two-factor sign-in off only for a holder who has lost both the authenticator and the recovery codes, once you know it is them: they are mailed, every session of theirs ends, and the log records who did it.</p>`;
}

export function adminAccountPage(
  session: Session,
  data: { account: Account; balance: number; held: number; keys: ApiKeyRecord[]; members: MemberLine[]; topUps: TopUpView[]; labelOf: (t: TopUpView) => string; flash?: string; error?: string },
): Html {
  const a = data.account;
  return layout(
    `Account ${a.name}`,
    session,
    html`<h1>${a.name} <code>${a.id}</code></h1>${data.flash === undefined ? '' : html`<p class="ok" role="status">${data.flash}</p>`}${errorBox(data.error)}
<div class="card"><div class="big">${usd(data.balance)}</div><p>balance, ${usd(data.held)} held by requests in flight.</p></div>
<form method="post" action="/admin/accounts/${a.id}/credit" class="card">${csrf(session)}<input type="hidden" name="idempotency_key" value="${`admin-${randomBytes(12).toString('hex')}`}">
<h2>Manual credit</h2><label>Amount, USD <input name="amount_usd" inputmode="decimal" required></label><button>Credit</button></form>
<h2>Keys</h2><table class="stack"><thead><tr><th>Name</th><th>Key</th><th>State</th><th></th></tr></thead><tbody>${data.keys.map(
      (k) => html`<tr><td data-label="Name">${k.name}</td><td data-label="Key"><code>${k.displayHint}</code></td><td data-label="State">${k.revokedAt === undefined ? 'active' : 'revoked'}</td><td>${
        k.revokedAt === undefined ? html`<form class="inline" method="post" action="/admin/accounts/${a.id}/keys/${k.id}/revoke">${csrf(session)}<button>Revoke for the holder</button></form>` : ''
      }</td></tr>`,
    )}</tbody></table>
<h2>Members</h2>${userRows(session, a.id, data.members)}
<h2>Top-ups</h2>${
      data.topUps.length === 0
        ? html`<p class="note">None.</p>`
        : html`<table class="stack"><thead><tr><th>Started</th><th>Method</th><th class="num">Credit</th><th>State</th></tr></thead><tbody>${data.topUps.map(
            (t) => html`<tr><td data-label="Started"><a href="/admin/top-ups/${t.id}">${when(t.createdAt)}</a></td><td data-label="Method">${data.labelOf(t)}</td><td data-label="Credit" class="num">$${formatCents(t.creditCents)}</td><td data-label="State">${t.state}</td></tr>`,
          )}</tbody></table>`
    }<p><a href="/admin">Back to admin</a></p>`,
  );
}
