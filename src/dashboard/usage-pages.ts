// The Usage page (requests newest first, filters, a daily spend chart per key, CSV export), the refund
// request form, and the Refunds page.
import { formatUsd } from '../billing/money.js';
import { isLimitReason, LIMITS } from '../limits/limits.js';
import { REQUEST_STATUSES, type DailyKeySpend, type RecordedUsage } from '../record/usage-query.js';
import { html, type Html } from './html.js';
import { errorBox, layout, mayDo, usd } from './pages.js';
import type { RefundTicket } from './refund-tickets.js';
import type { Session } from './sessions.js';
import type { UsageQuery } from './usage-view.js';
import { groupColours, spendChart } from './usage-chart.js';
import { USAGE_GROUPINGS, type GroupedUsage, type UsageDirectory } from './usage-groups.js';

const when = (ms: number | Date): string => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');


const ms = (n: number): string => (n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(n < 10_000 ? 2 : 1)} s`);

/** How the request ended and who served it: finish reason, then upstream, HTTP status, latency and first token. */
function finishCell(r: RecordedUsage): Html {
  const facts = [r.upstream, r.httpStatus === null ? undefined : `HTTP ${r.httpStatus}`, r.status === 'refused' ? undefined : ms(r.latencyMs), r.ttftMs === null ? undefined : `first token ${ms(r.ttftMs)}`].filter((x): x is string => x !== undefined && x !== null);
  return html`${r.finishReason ?? ''}${facts.length === 0 ? '' : html`<br><small class="note">${facts.join(' · ')}</small>`}`;
}

function statusCell(r: RecordedUsage): Html {
  if (r.status === 'refused') return html`<span class="refused">${r.refusalReason !== null && isLimitReason(r.refusalReason) ? LIMITS[r.refusalReason].dashboardLabel : 'refused'}</span>`;
  return html`${r.status.replace(/_/g, ' ')}${r.refunded ? html` · <strong>refunded</strong>` : ''}${r.modelRefused ? html` · <span title="The model declined to answer">model refused</span>` : ''}`;
}

/** One small bar chart per key: its spend on each of the last 30 days (inline SVG, no script). */
function spendCharts(days: DailyKeySpend[], keyNames: Map<string, string>): Html {
  if (days.length === 0) return html`<p class="note">No spend in the last 30 days.</p>`;
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  const dayList = Array.from({ length: 30 }, (_, i) => new Date(today - (29 - i) * 86_400_000).toISOString().slice(0, 10));
  const byKey = new Map<string, Map<string, number>>();
  for (const d of days) {
    const m = byKey.get(d.keyId) ?? new Map<string, number>();
    m.set(d.day, d.spent);
    byKey.set(d.keyId, m);
  }
  return html`${[...byKey].map(([keyId, spent]) => {
    const max = Math.max(1, ...spent.values());
    const total = [...spent.values()].reduce((a, b) => a + b, 0);
    return html`<figure class="card"><figcaption><strong>${keyNames.get(keyId) ?? keyId}</strong> · ${usd(total)} in 30 days</figcaption>
<svg viewBox="0 0 300 60" width="100%" height="60" role="img" aria-label="Daily spend of ${keyNames.get(keyId) ?? keyId} over 30 days">${dayList.map((day, i) => {
      const v = spent.get(day) ?? 0;
      const h = Math.round((v / max) * 56);
      return html`<rect x="${i * 10 + 1}" y="${58 - h}" width="8" height="${Math.max(h, v > 0 ? 1 : 0)}" fill="#2563eb"><title>${day}: $${formatUsd(v)}</title></rect>`;
    })}<line x1="0" y1="58.5" x2="300" y2="58.5" stroke="#9ca3af"/></svg></figure>`;
  })}`;
}

/**
 * Tokens in / out, and under them the input's prompt-cache classes when there were any: each is priced on
 * its own, so the holder sees what the cost was computed from.
 */
function tokensCell(r: RecordedUsage): Html {
  const u = r.usage;
  const classes: string[] = [];
  if (u.cachedInput > 0) classes.push(`cache read ${u.cachedInput}`);
  if ((u.cacheWrite5m ?? 0) > 0) classes.push(`cache write 5m ${u.cacheWrite5m}`);
  if ((u.cacheWrite1h ?? 0) > 0) classes.push(`cache write 1h ${u.cacheWrite1h}`);
  return classes.length === 0 ? html`${u.input} / ${u.output}` : html`${u.input} / ${u.output}<br><small class="cache">${classes.join(' · ')}</small>`;
}

const GROUPING_WORDS = { member: 'Member', team: 'Team' } as const;

/** The query string of the filters (not the grouping, the request id or the cursor), with changes. */
function filterParams(q: UsageQuery, change: Record<string, string | undefined> = {}): URLSearchParams {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries({ key: q.keyId, member: q.memberId, team: q.teamId, model: q.model, status: q.status, from: q.from, to: q.to, ...change })) if (v !== undefined) params.set(k, v);
  return params;
}

/**
 * The totals per member or per team: the chart of spend per day, then a table whose rows link to the
 * requests of that member (or team) and carry the chart's colours, with a total row.
 */
function groupedSection(g: GroupedUsage, q: UsageQuery): Html {
  const colours = groupColours(g);
  const word = GROUPING_WORDS[g.grouping];
  const filterKey = g.grouping === 'member' ? 'member' : 'team';
  const csv = filterParams(q, { group: g.grouping, from: g.period.from, to: g.period.to });
  const share = (cost: number): string => (g.total.cost === 0 ? '0' : ((cost * 100) / g.total.cost).toFixed(1));
  const rows = g.groups.map((x) => {
    const name = x.id === null ? html`${x.label}` : html`<a href="/usage?${filterParams(q, { [filterKey]: x.id, from: g.period.from, to: g.period.to }).toString()}">${x.label}</a>`;
    return html`<tr data-group="${x.id ?? ''}"><td data-label="${word}"><span aria-hidden="true" style="display:inline-block;width:.7rem;height:.7rem;border-radius:2px;margin-right:.4rem;background:${colours.get(x.id) ?? '#cbd5e1'}"></span>${name}</td>
<td data-label="Requests" class="num">${x.requests}</td><td data-label="Tokens in / out" class="num">${x.inputTokens} / ${x.outputTokens}</td>
<td data-label="Cost" class="num">${usd(x.cost)}${x.refunded > 0 ? html`<br><small class="note">${usd(x.refunded)} refunded</small>` : ''}</td>
<td data-label="Share" class="num"><meter class="bar" min="0" max="100" value="${share(x.cost)}" title="${share(x.cost)}% of the spend"></meter> ${share(x.cost)}%</td></tr>`;
  });
  return html`<section id="usage-by-${g.grouping}"><h2>Spend per ${g.grouping}, ${g.period.from} to ${g.period.to}</h2>${spendChart(g)}
${
  g.groups.length === 0
    ? html`<p class="note">No requests in this period.</p>`
    : html`<table class="stack" id="usage-groups"><thead><tr><th>${word}</th><th class="num">Requests</th><th class="num">Tokens in / out</th><th class="num">Cost</th><th class="num">Share</th></tr></thead><tbody>${rows}
<tr class="total"><td data-label="${word}"><strong>Total</strong></td><td data-label="Requests" class="num"><strong>${g.total.requests}</strong></td><td data-label="Tokens in / out" class="num">${g.total.inputTokens} / ${g.total.outputTokens}</td><td data-label="Cost" class="num"><strong>${usd(g.total.cost)}</strong></td><td></td></tr></tbody></table>`
}<p><a href="/usage.csv?${csv.toString()}">Export these totals as CSV</a></p></section>`;
}

/** Links to the totals per member and per team (the current one marked). */
function groupingLinks(q: UsageQuery): Html {
  return html`<p class="grouping">Spend per: ${USAGE_GROUPINGS.map((g) =>
    g === q.group ? html`<strong aria-current="page">${g}</strong> ` : html`<a href="/usage?${filterParams(q, { group: g }).toString()}">${g}</a> `,
  )}${q.group === undefined ? '' : html`· <a href="/usage?${filterParams(q).toString()}">requests only</a>`}</p>`;
}

export function usagePageHtml(
  session: Session,
  data: { records: RecordedUsage[]; nextCursor?: string; query: UsageQuery; keys: Array<{ id: string; name: string }>; days: DailyKeySpend[]; dir: UsageDirectory; grouped?: GroupedUsage; error?: string },
): Html {
  const q = data.query;
  const keyNames = new Map(data.keys.map((k) => [k.id, k.name]));
  const refunds = mayDo(session, 'refunds.request');
  const seesAll = mayDo(session, 'usage.all');
  const params = filterParams(q);
  const teams = data.dir.pickableTeams.map((id) => ({ id, name: data.dir.teams.get(id)?.name ?? id, deleted: data.dir.teams.get(id)?.deleted === true }));
  const rows = data.records.map(
    (r) => html`<tr><td>${when(r.finishedAt)}</td><td><code class="rid">${r.requestId}</code></td><td>${keyNames.get(r.keyId) ?? r.keyId}</td><td>${r.model}</td>
<td class="num">${tokensCell(r)}</td><td class="num">${usd(r.cost)}</td><td>${statusCell(r)}</td><td>${finishCell(r)}</td>
<td>${refunds && r.cost > 0 && !r.refunded ? html`<a href="/usage/${r.requestId}/refund">Request a refund</a>` : ''}</td></tr>`,
  );
  return layout(
    'Usage',
    session,
    html`<h1>Usage</h1>${seesAll ? '' : html`<p class="note">The requests made with your own keys.</p>`}${errorBox(data.error)}
<form method="get" action="/usage" class="card filters" role="search">
<label>Request id <input name="request_id" value="${q.requestId ?? ''}" placeholder="req_…"></label>
<label>Key <select name="key"><option value="">All keys</option>${data.keys.map((k) => html`<option value="${k.id}"${k.id === q.keyId ? html` selected` : ''}>${k.name}</option>`)}</select></label>
${seesAll ? html`<label>Member <select name="member"><option value="">All members</option>${[...data.dir.members].map(([id, email]) => html`<option value="${id}"${id === q.memberId ? html` selected` : ''}>${email}</option>`)}</select></label>` : ''}
${teams.length === 0 ? '' : html`<label>Team <select name="team"><option value="">All teams</option>${teams.map((t) => html`<option value="${t.id}"${t.id === q.teamId ? html` selected` : ''}>${t.name}${t.deleted ? ' (deleted)' : ''}</option>`)}</select></label>`}
<label>Model <input name="model" value="${q.model ?? ''}"></label>
<label>Status <select name="status"><option value="">Any</option>${REQUEST_STATUSES.map((s) => html`<option value="${s}"${s === q.status ? html` selected` : ''}>${s.replace(/_/g, ' ')}</option>`)}</select></label>
<label>From <input type="date" name="from" value="${q.from ?? ''}"></label><label>To <input type="date" name="to" value="${q.to ?? ''}"></label>
<label>Spend per <select name="group"><option value="">—</option>${USAGE_GROUPINGS.map((g) => html`<option value="${g}"${g === q.group ? html` selected` : ''}>${g}</option>`)}</select></label>
<button>Show</button> <a href="/usage.csv?${params.toString()}">Export CSV</a></form>
${groupingLinks(q)}${data.grouped === undefined ? '' : groupedSection(data.grouped, q)}
<h2>Requests</h2>${
  data.records.length === 0
    ? html`<p class="note">No requests match. Requests appear here a moment after they finish.</p>`
    : html`<table><thead><tr><th>Finished (UTC)</th><th>Request id</th><th>Key</th><th>Model</th><th class="num">Tokens in / out</th><th class="num">Cost</th><th>Status</th><th>Finish</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
}${data.nextCursor === undefined ? '' : html`<p><a href="/usage?${params.toString()}&cursor=${data.nextCursor}">Older requests</a></p>`}
<h2>Daily spend per key, last 30 days</h2>${spendCharts(data.days, keyNames)}`,
  );
}

export function refundRequestPage(session: Session, r: RecordedUsage, error?: string): Html {
  return layout(
    'Request a refund',
    session,
    html`<h1>Request a refund</h1>${errorBox(error)}<div class="card"><p>Request <code>${r.requestId}</code> · ${r.model} · ${when(r.finishedAt)} · cost <strong>${usd(r.cost)}</strong>${r.modelRefused ? html` · <strong>the model refused to answer</strong>` : ''}</p><p class="note">${finishCell(r)}</p>
<form method="post" action="/refunds"><input type="hidden" name="csrf" value="${session.csrfToken}"><input type="hidden" name="request_id" value="${r.requestId}">
<label>Why should it be refunded? <textarea name="reason" rows="4" required minlength="3" maxlength="2000"></textarea></label>
<button>Send to support</button> <a href="/usage">Cancel</a></form></div>`,
  );
}

export function refundsPage(session: Session, tickets: RefundTicket[], flash?: string): Html {
  return layout(
    'Refunds',
    session,
    html`<h1>Refund requests</h1>${flash === undefined ? '' : html`<p class="ok" role="status">${flash}</p>`}${
      tickets.length === 0
        ? html`<p class="note">No refund requests. Ask for one from a request on the <a href="/usage">Usage</a> page.</p>`
        : html`<table class="stack"><thead><tr><th>Asked</th><th>Request id</th><th class="num">Cost</th><th>Status</th><th>Reason</th></tr></thead><tbody>${tickets.map(
            (t) => html`<tr><td data-label="Asked">${when(t.createdAt)}</td><td data-label="Request id"><code class="rid">${t.requestId}</code></td><td data-label="Cost" class="num">${usd(t.cost)}</td>
<td data-label="Status">${t.status === 'approved' ? html`approved · ${usd(t.refunded ?? 0)} back` : t.status}${t.note === null ? '' : html` — ${t.note}`}</td><td data-label="Reason">${t.reason}</td></tr>`,
          )}</tbody></table>`
    }`,
  );
}
