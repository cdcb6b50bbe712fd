// The Audit log page: who changed what, when, from where, with the filters (who, what, when), a page
// at a time, and the link to the same entries as CSV. One page for an organization's owners and admins
// (their account's entries) and for the deployment's admin (every entry, or one account's).
import type { AuditEntry } from '../audit/entries.js';
import { html, type Html } from './html.js';
import { errorBox, layout } from './pages.js';
import type { Session } from './sessions.js';

/** The filters as the form and the links carry them (text as typed). */
export interface AuditLogQuery {
  who?: string;
  action?: string;
  from?: string;
  to?: string;
  /** The deployment admin's page only: one account's entries. */
  account?: string;
}

const when = (d: Date): string => d.toISOString().slice(0, 19).replace('T', ' ');

// A value shown in a change, cut short: the CSV and the admin API carry it whole.
const VALUE_SHOWN = 80;
const shown = (v: unknown): string => {
  const s = v === null || v === undefined ? '—' : typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > VALUE_SHOWN ? `${s.slice(0, VALUE_SHOWN - 1)}…` : s;
};

/** What changed, field by field: every field of a row created or deleted, the ones that differ of a change, an event's detail. */
function changeCell(e: AuditEntry): Html {
  const before = e.before ?? {};
  const after = e.after ?? {};
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  const changed = e.before !== null && e.after !== null ? fields.filter((f) => JSON.stringify(before[f]) !== JSON.stringify(after[f])) : fields;
  if (changed.length === 0) return html`<span class="note">—</span>`;
  const line = (f: string): Html =>
    e.before !== null && e.after !== null
      ? html`<div><code>${f}</code> ${shown(before[f])} → ${shown(after[f])}</div>`
      : html`<div><code>${f}</code> ${shown(e.after === null ? before[f] : after[f])}</div>`;
  return html`${e.after === null && e.before !== null ? html`<div class="note">deleted:</div>` : ''}${changed.map(line)}`;
}

function whoCell(e: AuditEntry): Html {
  const name = e.actorLabel ?? e.actorId ?? (e.actorKind === 'user' ? 'a visitor (not signed in)' : '');
  return html`${name}<br><small class="note">${e.actorKind.replace('_', ' ')}</small>`;
}

function queryString(q: AuditLogQuery): URLSearchParams {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (typeof v === 'string' && v !== '') p.set(k, v);
  return p;
}

export function auditLogPageHtml(
  session: Session,
  data: { path: '/audit-log' | '/admin/audit-log'; entries: AuditEntry[]; nextCursor?: number; query: AuditLogQuery; error?: string },
): Html {
  const q = data.query;
  const all = data.path === '/admin/audit-log';
  const params = queryString(q);
  const rows = data.entries.map(
    (e) => html`<tr id="entry-${e.seq}"><td data-label="When (UTC)"><time>${when(e.at)}</time></td><td data-label="Who">${whoCell(e)}</td><td data-label="From">${e.address ?? ''}</td>
<td data-label="What"><code>${e.action}</code>${e.target === null ? '' : html`<br><small>${e.target}</small>`}${all && e.accountId !== null ? html`<br><small class="note">${e.accountId}</small>` : ''}</td>
<td data-label="Change">${changeCell(e)}</td><td data-label="Request id">${e.requestId === null ? '' : html`<code class="rid">${e.requestId}</code>`}</td></tr>`,
  );
  return layout(
    'Audit log',
    session,
    html`<h1>Audit log</h1><p class="note">${all ? 'Every change on this Tollgate' : 'Every change in this account'}: who made it, when, from where, and the values before and after (secrets never). Entries are chained by their hashes; the operator can check that none was edited since it was written.</p>${errorBox(data.error)}
<form method="get" action="${data.path}" class="card filters" role="search">
<label>Who <input name="who" value="${q.who ?? ''}" placeholder="e-mail or user id"></label>
<label>What <input name="action" value="${q.action ?? ''}" placeholder="api_keys, sign_in., …"></label>
<label>From <input type="date" name="from" value="${q.from ?? ''}"></label><label>To <input type="date" name="to" value="${q.to ?? ''}"></label>
${all ? html`<label>Account <input name="account" value="${q.account ?? ''}" placeholder="acct_…"></label>` : ''}
<button>Show</button> <a href="${data.path}.csv?${params.toString()}">Export CSV</a></form>
${
  data.entries.length === 0
    ? html`<p class="note">No entries match.</p>`
    : html`<table class="stack"><thead><tr><th>When (UTC)</th><th>Who</th><th>From</th><th>What</th><th>Change</th><th>Request id</th></tr></thead><tbody>${rows}</tbody></table>`
}${data.nextCursor === undefined ? '' : html`<p><a href="${data.path}?${params.toString()}${params.size === 0 ? '' : '&'}cursor=${data.nextCursor}">Older entries</a></p>`}`,
  );
}
