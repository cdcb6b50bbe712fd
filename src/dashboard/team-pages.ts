// The Teams page (each team's budgets, spend, members and keys; creating, editing and deleting teams) and
// the budgets section of the Members page (each member's budgets and spend). Controls are shown only to a
// role that may use them (the routes check the same permissions).
import type { KeySpend } from '../billing/ledger.js';
import { formatUsd } from '../billing/money.js';
import { html, type Html } from './html.js';
import type { MemberLine } from './memberships.js';
import { errorBox, layout, mayDo, usd } from './pages.js';
import type { Session } from './sessions.js';
import type { MemberBudgetView, TeamView } from './teams.js';

const csrf = (s: Session): Html => html`<input type="hidden" name="csrf" value="${s.csrfToken}">`;
const usdInput = (micros: number | undefined): string => (micros === undefined ? '' : formatUsd(micros));
const notice = (text: string | undefined): Html | string => (text === undefined ? '' : html`<p class="ok" role="status">${text}</p>`);

/** Spend against a budget: the amount, and a meter when a budget is set. */
function against(spent: number, budget: number | undefined, label: string): Html {
  if (budget === undefined) return html`${usd(spent)} <span class="note">no budget</span>`;
  const shown = Math.min(spent, budget);
  return html`${usd(spent)} of ${usd(budget)}<meter class="bar" min="0" max="${budget}" low="${Math.floor(budget * 0.8)}" high="${Math.floor(budget * 0.8)}" optimum="0" value="${shown}" aria-label="${label}: ${Math.floor((shown * 100) / Math.max(budget, 1))}% used"></meter>`;
}

const spendCells = (spend: KeySpend, budgets: { monthlyBudget?: number; lifetimeBudget?: number }, who: string): Html =>
  html`<td data-label="This month">${against(spend.monthSpent, budgets.monthlyBudget, `${who} this month against the monthly budget`)}</td><td data-label="Lifetime">${against(spend.lifetimeSpent, budgets.lifetimeBudget, `${who} over its life against the lifetime budget`)}</td>`;

function budgetInputs(b: { monthlyBudget?: number; lifetimeBudget?: number }, none: string): Html {
  return html`<label>Monthly budget, USD (${none}) <input name="monthly_budget_usd" inputmode="decimal" pattern="\\d{1,10}(\\.\\d{1,6})?" value="${usdInput(b.monthlyBudget)}"></label>
<label>Lifetime budget, USD (${none}) <input name="lifetime_budget_usd" inputmode="decimal" pattern="\\d{1,10}(\\.\\d{1,6})?" value="${usdInput(b.lifetimeBudget)}"></label>`;
}

function teamCard(session: Session, t: TeamView, members: MemberLine[]): Html {
  const manage = mayDo(session, 'teams.manage');
  const outside = members.filter((m) => !t.members.some((x) => x.userId === m.userId));
  return html`<section class="card" id="team-${t.id}"><h2>${t.name}</h2>
<table class="stack"><thead><tr><th>This month</th><th>Lifetime</th><th>Keys</th></tr></thead><tbody><tr>${spendCells(t.spend, t, t.name)}<td data-label="Keys">${t.keys}</td></tr></tbody></table>
<h3>Members</h3>${
    t.members.length === 0
      ? html`<p class="note">None yet.</p>`
      : html`<ul class="team-members">${t.members.map(
          (m) => html`<li>${m.email}${manage ? html` <form class="inline" method="post" action="/teams/${t.id}/members/${m.userId}/remove">${csrf(session)}<button class="danger" aria-label="Take ${m.email} out of ${t.name}">Take out</button></form>` : ''}</li>`,
        )}</ul>`
  }${
    manage
      ? html`${
          outside.length === 0
            ? ''
            : html`<form method="post" action="/teams/${t.id}/members" class="row">${csrf(session)}<label>Add a member <select name="user_id">${outside.map((m) => html`<option value="${m.userId}">${m.email}</option>`)}</select></label><button>Add to ${t.name}</button></form>`
        }
<details><summary>Rename or change the budgets</summary><form method="post" action="/teams/${t.id}">${csrf(session)}<label>Name <input name="name" required maxlength="60" value="${t.name}"></label>
${budgetInputs(t, 'empty: none')}<button>Save ${t.name}</button></form>
<form method="post" action="/teams/${t.id}/delete">${csrf(session)}<button class="danger">Delete ${t.name}</button> <span class="note">Its keys leave it; what they spent stays charged to it.</span></form></details>`
      : ''
  }</section>`;
}

export function teamsPage(session: Session, data: { teams: TeamView[]; members: MemberLine[]; available: boolean; notice?: string; error?: string; draft?: { name: string } }): Html {
  const manage = mayDo(session, 'teams.manage');
  const all = mayDo(session, 'teams.all');
  return layout(
    'Teams',
    session,
    html`<h1>Teams</h1>${notice(data.notice)}${errorBox(data.error)}
<p class="note">A team groups members and keys. A key is in at most one team; its requests are admitted only while the team's budgets, its owner's budgets, its own caps and the balance all have room.${
      all ? '' : ' You see the teams you are in.'
    }</p>${
      !data.available
        ? html`<p class="warn" role="note">Teams are kept in the record (DATABASE_URL); this Tollgate runs without one.</p>`
        : html`${data.teams.length === 0 ? html`<p>No teams${all ? ' yet' : ' of yours'}.</p>` : data.teams.map((t) => teamCard(session, t, data.members))}${
            manage
              ? html`<section class="card" id="new-team"><h2>Create a team</h2><form method="post" action="/teams">${csrf(session)}<label>Name <input name="name" required maxlength="60" value="${data.draft?.name ?? ''}" placeholder="search"></label>
${budgetInputs({}, 'optional')}<button>Create team</button></form></section>`
              : html`<p class="note">Owners and admins create teams, set their budgets and add members.</p>`
          }`
    }`,
  );
}

/** The Members page's budgets: each member's (or, for a member, their own) budgets and spend, and the form to set them. */
export function memberBudgetsSection(session: Session, budgets: MemberBudgetView[]): Html {
  const manage = mayDo(session, 'budgets.manage');
  return html`<h2 id="budgets">Budgets</h2><p class="note">A member's spend is what the keys they made here spent. ${
    manage ? 'A request is refused (402) once it would take a member past a budget.' : 'Owners and admins set them.'
  }</p>
<table class="stack" id="member-budgets"><thead><tr><th>Member</th><th>This month</th><th>Lifetime</th>${manage ? html`<th></th>` : ''}</tr></thead><tbody>${budgets.map(
    (b) => html`<tr><td data-label="Member">${b.email}${b.userId === session.user.id ? html` <span class="note">(you)</span>` : ''}</td>${spendCells(b.spend, b, b.email)}${
      manage
        ? html`<td class="actions"><details><summary>Set budgets</summary><form method="post" action="/members/${b.userId}/budgets">${csrf(session)}${budgetInputs(b, 'empty: none')}<button>Save budgets of ${b.email}</button></form></details></td>`
        : ''
    }</tr>`,
  )}</tbody></table>`;
}
