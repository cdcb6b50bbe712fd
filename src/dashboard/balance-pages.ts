// The Balance page: what the account can spend and what requests in flight hold, the top-up form (a
// quote first: credit, fee and total are shown before any payment starts), the top-ups with their
// state, and the statement of record with a running balance.
import type { AutoTopUpSettings } from '../top-ups/auto-top-up.js';
import { formatUsd } from '../billing/money.js';
import type { StatementLine, StatementPage, StatementTokens } from '../record/statement.js';
import type { TopUpQuote } from '../top-ups/quote.js';
import { formatCents } from '../top-ups/quote.js';
import { TopUpService, type TopUpView } from '../top-ups/service.js';
import { html, type Html } from './html.js';
import { errorBox, layout, mayDo, usd } from './pages.js';
import type { Session } from './sessions.js';

export interface PaymentChoice {
  name: string;
  label: string;
}

const when = (d: Date | number): string => new Date(d).toISOString().slice(0, 16).replace('T', ' ');
const dollars = (cents: number): string => `$${formatCents(cents)}`;
const signed = (micros: number): string => (micros < 0 ? `−$${formatUsd(-micros)}` : `+$${formatUsd(micros)}`);

const STATE_WORDS: Record<string, string> = {
  quoted: 'Quoted',
  pending: 'Awaiting payment',
  cancelled: 'Cancelled',
  credited: 'Credited',
  failed: 'Not paid',
  expired: 'Expired',
  refunded: 'Refunded',
  disputed: 'Disputed',
  reversed: 'Reversed: the payment was voided',
};

/** A top-up's state in words; an automatic one not charged yet says so. */
const stateWords = (t: TopUpView): string => (t.origin === 'auto' && t.state === 'quoted' ? 'Not charged yet' : (STATE_WORDS[t.state] ?? t.state));

/** How it was paid: the provider's label, and whether an automatic top-up charged a saved card. */
const method = (t: TopUpView, labelOf: MethodLabel): string => `${labelOf(t)}${t.origin === 'auto' ? ' · automatic' : ''}`;

/** The latest "part of it arrived" note of an open crypto top-up, so the holder knows to send the rest. */
function partPaid(t: TopUpView): Html | string {
  if (t.state !== 'pending' && t.state !== 'quoted') return '';
  const last = [...(t.timeline ?? [])].reverse().find((e) => e.kind === 'partly_paid');
  if (last?.amountCents === null || last?.amountCents === undefined) return '';
  return html`<p class="note" role="status" id="part-paid">${dollars(last.amountCents)} of ${dollars(t.totalCents)} has arrived. Send the remaining ${dollars(Math.max(0, t.totalCents - last.amountCents))} from the payment page before the invoice expires; nothing is credited until all of it arrives.</p>`;
}

const KIND_WORDS: Record<string, string> = {
  top_up: 'Top-up',
  admin_credit: 'Credit',
  refund: 'Refund of a request',
  reversal: 'Top-up refunded to the payer',
  dispute_hold: 'Held for a payment dispute',
  dispute_release: 'Dispute won: released',
  usage: 'Usage',
  adjustment: 'Adjustment',
};

function topUpForm(session: Session, error?: string, amount = ''): Html {
  return html`<form method="post" action="/balance/quote" class="card"><input type="hidden" name="csrf" value="${session.csrfToken}">
<h2>Add money</h2>${errorBox(error)}
<label>Amount to add, USD (at least 5.00) <input name="amount_usd" inputmode="decimal" required pattern="\\$?\\s*\\d{1,9}(\\.\\d{1,2})?" value="${amount}"></label>
<p class="note">A service fee of 3.5% + $0.30 is added at checkout; you see the total before paying.</p>
<button>See the total</button></form>`;
}

/** A top-up's payment method as pages show it: its provider's label. */
export type MethodLabel = (t: TopUpView) => string;

function topUpRows(topUps: TopUpView[], labelOf: MethodLabel): Html {
  if (topUps.length === 0) return html`<p class="note">No top-ups yet.</p>`;
  return html`<table><thead><tr><th>Started</th><th>Method</th><th class="num">Credit</th><th class="num">Paid</th><th>State</th></tr></thead><tbody>${topUps.map(
    (t) => html`<tr><td><a href="/top-ups/${t.id}">${when(t.createdAt)}</a></td><td>${method(t, labelOf)}</td><td class="num">${dollars(t.creditCents)}</td><td class="num">${dollars(t.totalCents)}</td><td>${stateWords(t)}</td></tr>`,
  )}</tbody></table>`;
}

/** A usage charge's tokens by price class, the cache classes only when there were some. */
function statementTokens(t: StatementTokens): Html {
  const cache: string[] = [];
  if (t.cacheRead > 0) cache.push(`cache read ${t.cacheRead}`);
  if (t.cacheWrite5m > 0) cache.push(`cache write 5m ${t.cacheWrite5m}`);
  if (t.cacheWrite1h > 0) cache.push(`cache write 1h ${t.cacheWrite1h}`);
  return html`<br><small class="tokens">${t.input} in${cache.length === 0 ? '' : ` (${cache.join(' · ')})`} / ${t.output} out</small>`;
}

/** A request's id; for a usage posting of many requests, how many, linked to the usage page. */
function statementDetail(l: StatementLine): Html | string {
  if (l.requestId !== null) return html` <code>${l.requestId}</code>${l.tokens === undefined ? '' : statementTokens(l.tokens)}`;
  if (l.kind === 'usage' && l.memo !== null) return html` · <a href="/usage">${l.memo}</a>`;
  return '';
}

function statementRows(page: StatementPage): Html {
  if (page.lines.length === 0) return html`<p class="note">Nothing yet: money added and every request's charge appear here.</p>`;
  // Stacked into labelled lines on a narrow screen: Amount and Balance stay in view, no sideways scroll.
  return html`<table class="stack" id="statement"><thead><tr><th>When</th><th>What</th><th class="num">Amount</th><th class="num">Balance</th></tr></thead><tbody>${page.lines.map(
    (l) => html`<tr><td data-label="When">${when(l.createdAt)}</td><td data-label="What">${KIND_WORDS[l.kind] ?? l.kind}${statementDetail(l)}</td><td data-label="Amount" class="num">${signed(l.amount)}</td><td data-label="Balance" class="num">${usd(l.balanceAfter)}</td></tr>`,
  )}</tbody></table>${page.nextCursor === undefined ? '' : html`<p><a href="/balance?cursor=${page.nextCursor}">Older entries</a></p>`}`;
}

/** The automatic top-up card: save a card, then a threshold, an amount and a monthly maximum. */
function autoTopUpSection(session: Session, a: AutoTopUpSettings, note?: string, error?: string): Html {
  const usdInput = (cents: number): string => formatCents(cents);
  return html`<section class="card" id="auto-top-up"><h2>Automatic top-up</h2>${errorBox(error)}${note === undefined ? '' : html`<p class="ok" role="status">${note}</p>`}
${a.disabledReason === null ? '' : html`<p class="error" role="alert">${a.disabledReason}</p>`}
<p class="note">When your balance falls below the threshold, the saved card is charged for the amount plus the usual fee (3.5% + $0.30). The monthly maximum caps what the card is charged, fees included. This month: ${dollars(a.chargedThisMonthCents)} charged of ${dollars(a.monthlyMaxCents)}.</p>
${
  a.card === null
    ? html`<form method="post" action="/balance/auto-top-up/card"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Save a card</button></form>`
    : html`<div>Card: <strong>${a.card}</strong> <form method="post" action="/balance/auto-top-up/card"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Use another card</button></form></div>
<form method="post" action="/balance/auto-top-up"><input type="hidden" name="csrf" value="${session.csrfToken}">
<label>When the balance is below, USD <input name="threshold_usd" inputmode="decimal" required value="${usdInput(a.thresholdCents)}"></label>
<label>Add, USD (at least 5.00) <input name="amount_usd" inputmode="decimal" required value="${usdInput(a.amountCents)}"></label>
<label>At most charged per month, USD (amount + fee) <input name="monthly_max_usd" inputmode="decimal" required value="${usdInput(a.monthlyMaxCents)}"></label>
<label><input type="checkbox" name="enabled"${a.enabled ? html` checked` : ''}> Top up automatically</label>
<p class="note">Turning it off stops any automatic top-up not charged yet.</p>
<button>Save</button></form>`
}</section>`;
}

export function balancePage(
  session: Session,
  data: {
    balance: number;
    held: number;
    topUps: TopUpView[];
    labelOf: MethodLabel;
    statement: StatementPage;
    canTopUp: boolean;
    flash?: TopUpView;
    /** Back from the provider's page by its "cancel" link. */
    left?: boolean;
    error?: string;
    amount?: string;
    auto?: AutoTopUpSettings;
    autoNote?: string;
    autoError?: string;
  },
): Html {
  const flash = data.flash;
  // Seeing the balance (billing.view) is not adding to it (billing.manage): an admin sees, an owner or billing member pays.
  const manage = mayDo(session, 'billing.manage');
  return layout(
    'Balance',
    session,
    html`<h1>Balance</h1>${flash === undefined ? '' : flashBox(session, flash, data.left === true)}
<div class="card"><div class="big" id="balance">${usd(data.balance)}</div><p>available to spend${data.held > 0 ? html`, of which <strong>${usd(data.held)}</strong> is held by requests in flight` : ''}.</p></div>
${
  !manage
    ? html`<p class="note">Adding money is for this account's owners and billing members.</p>`
    : data.canTopUp
      ? topUpForm(session, data.error, data.amount)
      : html`<p class="note">Top-ups are not set up on this Tollgate; ask the operator.</p>`
}
${data.auto === undefined || !manage ? '' : autoTopUpSection(session, data.auto, data.autoNote, data.autoError)}
<h2>Top-ups</h2>${topUpRows(data.topUps, data.labelOf)}
<h2>Statement</h2><p class="note">Usage is posted here in batches of many requests; who spent it, per member or per team, is on the Usage page: <a href="/usage?group=member">spend per member</a> · <a href="/usage?group=team">spend per team</a>.</p>${statementRows(data.statement)}`,
  );
}

/** What the page says of the top-up the holder came back from. */
function flashBox(session: Session, t: TopUpView, left: boolean): Html {
  if (t.state === 'credited') return html`<p class="ok" role="status">${dollars(t.creditCents)} was added to your balance.</p>`;
  if (t.state === 'cancelled') return html`<p class="note" role="status">Top-up cancelled: nothing was charged.</p>`;
  if (left && TopUpService.openCheckout(t)) {
    return html`<div class="card" role="status" id="left-checkout"><p>You left the payment page. The checkout of ${dollars(t.totalCents)} is still open and nothing has been charged.</p>
<form class="inline" method="post" action="/top-ups/${t.id}/cancel"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Cancel this top-up</button></form>${
      t.checkoutUrl === null ? '' : html` or <a href="${t.checkoutUrl}">go back to the payment page</a>`
    }</div>`;
  }
  return html`<p class="note" role="status">Your top-up of ${dollars(t.creditCents)} is ${stateWords(t).toLowerCase()}. <a href="/top-ups/${t.id}">Details</a></p>${partPaid(t)}`;
}

/** The holder's cancel button: a checkout still open, or an automatic top-up not charged yet. */
function cancelForm(session: Session, t: TopUpView): Html | string {
  const open = TopUpService.openCheckout(t);
  if (!open && !(t.origin === 'auto' && t.state === 'quoted')) return '';
  return html`<form method="post" action="/top-ups/${t.id}/cancel"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>${open ? 'Cancel this top-up' : 'Cancel this automatic top-up'}</button></form>`;
}

export function quotePage(session: Session, amountInput: string, q: TopUpQuote, methods: PaymentChoice[]): Html {
  return layout(
    'Confirm top-up',
    session,
    html`<h1>Confirm your top-up</h1><div class="card"><dl class="quote">
<dt>Added to your balance</dt><dd id="quote-credit">${dollars(q.creditCents)}</dd>
<dt>Service fee (3.5% + $0.30)</dt><dd id="quote-fee">${dollars(q.feeCents)}</dd>
<dt><strong>Total to pay</strong></dt><dd id="quote-total"><strong>${dollars(q.totalCents)}</strong></dd></dl>
<form method="post" action="/balance/top-ups"><input type="hidden" name="csrf" value="${session.csrfToken}"><input type="hidden" name="amount_usd" value="${amountInput}">
${methods.map((m) => html`<button name="provider" value="${m.name}">Pay ${dollars(q.totalCents)} by ${m.label.toLowerCase()}</button> `)}</form></div>
<p><a href="/balance">Change the amount</a></p>`,
  );
}

export function topUpPage(session: Session, t: TopUpView, labelOf: MethodLabel, admin = false): Html {
  const canRecheck = (admin || mayDo(session, 'billing.manage')) && t.origin === 'checkout' && (t.state === 'pending' || t.state === 'quoted' || t.state === 'cancelled' || t.state === 'failed' || t.state === 'expired');
  return layout(
    'Top-up',
    session,
    html`<h1>Top-up of ${dollars(t.creditCents)}</h1><p>${method(t, labelOf)} · ${dollars(t.totalCents)} to pay (fee ${dollars(t.feeCents)}) · <strong>${stateWords(t)}</strong></p>
${partPaid(t)}<h2>Timeline</h2><ol>${(t.timeline ?? []).map((e) => html`<li><time>${when(e.at)}</time> ${e.kind.replace(/_/g, ' ')}${e.amountCents === null ? '' : html` · ${dollars(e.amountCents)}`}${e.detail === null ? '' : html` — ${e.detail}`}</li>`)}</ol>
${
  canRecheck
    ? html`<form method="post" action="${admin ? `/admin/top-ups/${t.id}/recheck` : `/top-ups/${t.id}/recheck`}"><input type="hidden" name="csrf" value="${session.csrfToken}"><button>Re-check payment</button></form>`
    : ''
}${admin || !mayDo(session, 'billing.manage') ? '' : cancelForm(session, t)}${TopUpService.openCheckout(t) ? html`<p><a href="${t.checkoutUrl ?? ''}">Go back to the payment page</a></p>` : ''}
<p><a href="/balance">Back to your balance</a></p>`,
  );
}
