// The pages of organizations: Members (roles, invitations, removal), the organization's settings
// (name, ownership, deletion, leaving), a new organization, and an invitation's link. Controls are
// shown only to a role that may use them (the routes check the same permissions).
import { html, type Html } from './html.js';
import type { InvitationOffer, InvitationView } from './invitations.js';
import type { MemberLine } from './memberships.js';
import type { OrganizationView } from './organizations.js';
import { errorBox, layout, mayDo, usd } from './pages.js';
import { MEMBER_ROLES, PERMISSION_NAMES, ROLE_PERMISSIONS, ROLE_SUMMARIES, type MemberRole, type Permission } from './roles.js';
import type { Session } from './sessions.js';
import { memberBudgetsSection } from './team-pages.js';
import type { MemberBudgetView } from './teams.js';

const csrf = (s: Session): Html => html`<input type="hidden" name="csrf" value="${s.csrfToken}">`;
const day = (d: Date): string => d.toISOString().slice(0, 10);
const badge = (role: MemberRole): Html => html`<span class="role ${role}">${role}</span>`;
const notice = (text: string | undefined): Html | string => (text === undefined ? '' : html`<p class="ok" role="status">${text}</p>`);

/** The roles a member may hand out: an owner every role, an admin all but owner. */
const grantable = (session: Session): readonly MemberRole[] => (mayDo(session, 'ownership.transfer') ? MEMBER_ROLES : MEMBER_ROLES.filter((r) => r !== 'owner'));

function roleOptions(roles: readonly MemberRole[], chosen: MemberRole): Html[] {
  return roles.map((r) => html`<option value="${r}"${r === chosen ? html` selected` : ''}>${r}</option>`);
}

/** What each role may do, drawn from the one permission table (roles.ts). */
function rolesTable(): Html {
  const permissions = Object.keys(PERMISSION_NAMES) as Permission[];
  return html`<details class="card" id="roles"><summary><strong>What each role can do</strong></summary>
<ul>${MEMBER_ROLES.map((r) => html`<li>${badge(r)} ${ROLE_SUMMARIES[r]}</li>`)}</ul>
<table><thead><tr><th>Permission</th>${MEMBER_ROLES.map((r) => html`<th>${r}</th>`)}</tr></thead><tbody>${permissions.map(
    (p) => html`<tr><td>${PERMISSION_NAMES[p]}</td>${MEMBER_ROLES.map((r) => html`<td>${ROLE_PERMISSIONS[r][p] ? '✓' : ''}</td>`)}</tr>`,
  )}</tbody></table></details>`;
}

function memberRows(session: Session, members: MemberLine[]): Html {
  const manage = mayDo(session, 'members.manage');
  const roles = grantable(session);
  const controls = (m: MemberLine): Html | string => {
    if (!manage || m.userId === session.user.id) return '';
    // Only an owner changes or removes an owner.
    if (m.role === 'owner' && !mayDo(session, 'ownership.transfer')) return html`<span class="note">owners change owners</span>`;
    return html`<form class="inline row" method="post" action="/members/${m.userId}/role">${csrf(session)}<label class="sr" for="role-${m.userId}">Role of ${m.email}</label><select id="role-${m.userId}" name="role">${roleOptions(roles, m.role)}</select><button>Change role</button></form>
<form class="inline" method="post" action="/members/${m.userId}/remove">${csrf(session)}<button class="danger">Remove</button></form>`;
  };
  return html`<table class="stack" id="members"><thead><tr><th>Member</th><th>Role</th><th>Joined</th>${manage ? html`<th></th>` : ''}</tr></thead><tbody>${members.map(
    (m) => html`<tr><td data-label="Member">${m.email}${m.userId === session.user.id ? html` <span class="note">(you)</span>` : ''}</td><td data-label="Role">${badge(m.role)}</td><td data-label="Joined">${day(m.joinedAt)}</td>${
      manage ? html`<td class="actions">${controls(m)}</td>` : ''
    }</tr>`,
  )}</tbody></table>`;
}

function invitationRows(session: Session, invitations: InvitationView[]): Html {
  if (invitations.length === 0) return html`<p class="note">No invitations waiting.</p>`;
  return html`<table class="stack" id="invitations"><thead><tr><th>Address</th><th>Role</th><th>Invited by</th><th>Expires</th><th></th></tr></thead><tbody>${invitations.map(
    (i) => html`<tr><td data-label="Address">${i.email}</td><td data-label="Role">${badge(i.role)}</td><td data-label="Invited by">${i.invitedBy}</td><td data-label="Expires">${day(i.expiresAt)}</td>
<td><form class="inline" method="post" action="/members/invitations/${i.id}/revoke">${csrf(session)}<button class="danger">Revoke</button></form></td></tr>`,
  )}</tbody></table>`;
}

export function membersPage(
  session: Session,
  data: { members: MemberLine[]; invitations?: InvitationView[]; notice?: string; error?: string; invite?: { email: string; role: MemberRole }; budgets?: MemberBudgetView[] },
): Html {
  const name = session.member?.organization;
  const manage = mayDo(session, 'members.manage') && name !== undefined;
  const invite = data.invite ?? { email: '', role: 'member' };
  return layout(
    'Members',
    session,
    html`<h1>${name === undefined ? 'People in this account' : html`Members of ${name}`}</h1>${notice(data.notice)}${errorBox(data.error)}
${name === undefined ? html`<p class="note">This is your personal account. <a href="/organizations/new">Create an organization</a> to invite others and give them roles.</p>` : ''}
${memberRows(session, data.members)}
${data.budgets === undefined || data.budgets.length === 0 ? '' : memberBudgetsSection(session, data.budgets)}
${
  manage
    ? html`<section class="card" id="invite"><h2>Invite someone</h2><p class="note">They get a link by e-mail that works once, for 7 days; they accept by signing in or signing up with that address.</p>
<form method="post" action="/members/invite" class="row">${csrf(session)}<label>E-mail <input type="email" name="email" required value="${invite.email}" autocomplete="off"></label>
<label>Role <select name="role">${roleOptions(grantable(session), invite.role)}</select></label><button>Send invitation</button></form></section>
<h2>Invitations waiting</h2>${invitationRows(session, data.invitations ?? [])}`
    : name === undefined
      ? ''
      : html`<p class="note">Owners and admins invite and remove members and change their roles.</p>`
}
${name === undefined ? '' : rolesTable()}`,
  );
}

export function organizationPage(session: Session, data: { org: OrganizationView; members: MemberLine[]; balance: number; held: number; notice?: string; error?: string }): Html {
  const { org } = data;
  const others = data.members.filter((m) => m.userId !== session.user.id);
  const empty = data.balance === 0 && data.held === 0;
  return layout(
    'Organization settings',
    session,
    html`<h1>${org.name}</h1><p class="note">Organization <code>${org.accountId}</code> · created ${day(org.createdAt)} · owners: ${org.owners.join(', ')}</p>${notice(data.notice)}${errorBox(data.error)}
${
  mayDo(session, 'organization.manage')
    ? html`<section class="card"><h2>Name</h2><form method="post" action="/organization/name" class="row">${csrf(session)}<label>Name <input name="name" required maxlength="100" value="${org.name}"></label><button>Rename</button></form></section>`
    : ''
}${
      mayDo(session, 'ownership.transfer')
        ? html`<section class="card" id="transfer"><h2>Transfer ownership</h2>${
            others.length === 0
              ? html`<p class="note">Invite someone first: ownership goes to another member.</p>`
              : html`<p>The member you choose becomes an owner, and you become an admin.</p><form method="post" action="/organization/transfer" class="row">${csrf(session)}<label>New owner <select name="user_id">${others.map((m) => html`<option value="${m.userId}">${m.email} (${m.role})</option>`)}</select></label><button>Transfer ownership</button></form>`
          }</section>`
        : ''
    }
<section class="card"><h2>Leave ${org.name}</h2><p>Your keys in this organization are revoked; their usage stays on record. ${session.member?.role === 'owner' ? 'An organization keeps at least one owner: make someone else an owner first if you are the only one.' : ''}</p>
<form method="post" action="/organization/leave">${csrf(session)}<button class="danger">Leave the organization</button></form></section>
${
  mayDo(session, 'organization.delete')
    ? html`<section class="card danger-zone" id="delete"><h2>Delete the organization</h2>
<p>Every key is revoked and every member removed; pending invitations stop working. The statement and the usage stay on record with the operator. An organization is deleted only with a balance of 0.00 and nothing held.</p>${
        empty
          ? html`<form method="post" action="/organization/delete">${csrf(session)}<label>Type the name to confirm <input name="confirm" required autocomplete="off"></label><button class="danger">Delete ${org.name}</button></form>`
          : html`<p class="warn" role="note">It still holds <strong>${usd(data.balance)}</strong>${data.held === 0 ? '' : html` (and ${usd(data.held)} held by requests in flight)`}: spend it, or ask the operator to refund it, before deleting.</p>`
      }</section>`
    : ''
}`,
  );
}

export function newOrganizationPage(session: Session, error?: string, name = ''): Html {
  return layout(
    'New organization',
    session,
    html`<h1>Create an organization</h1>${errorBox(error)}
<p>An organization is an account of its own: its own balance, top-ups and keys, and members you invite in roles. You will be its owner.</p>
${
  session.user.emailVerified
    ? html`<form method="post" action="/organizations" class="card">${csrf(session)}<label>Name <input name="name" required maxlength="100" value="${name}" placeholder="Acme platform team"></label><button>Create organization</button></form>`
    : html`<p class="warn" role="note">Confirm your e-mail address first: open the link we mailed to ${session.user.email}.</p>`
}`,
  );
}

/** An invitation's link: accept (signed in with the invited address), or sign in or sign up with it. */
export function invitationPage(p: { token: string; offer: InvitationOffer; session?: Session; error?: string; form?: 'sign-in' | 'sign-up' }): Html {
  const { offer, token, session } = p;
  const hidden = html`<input type="hidden" name="invitation" value="${token}">`;
  const intro = html`<div class="card"><p><strong>${offer.invitedBy}</strong> invites <strong>${offer.email}</strong> to <strong>${offer.organization}</strong> as ${badge(offer.role)}: ${ROLE_SUMMARIES[offer.role]}.</p><p class="note">The link works once, until ${day(offer.expiresAt)}.</p></div>`;
  let way: Html;
  if (session !== undefined && session.user.email === offer.email) {
    way = html`<form method="post" action="/invitations/${token}/accept">${csrf(session)}<button>Join ${offer.organization}</button></form>`;
  } else if (session !== undefined) {
    way = html`<p class="warn" role="note">You are signed in as ${session.user.email}, and this invitation is for ${offer.email}. Sign out, then open this link again to sign in with that address.</p>`;
  } else {
    way = html`<div class="row">
<form method="post" action="/sign-in" class="card" id="invitation-sign-in"><h2>I have an account</h2>${hidden}<input type="hidden" name="email" value="${offer.email}">
<p>Sign in as ${offer.email}</p><label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<label>Authenticator or recovery code (only with two-factor sign-in) <input name="code" autocomplete="one-time-code" autocapitalize="off" spellcheck="false" maxlength="24"></label>
<button>Sign in and join</button></form>
<form method="post" action="/sign-up" class="card" id="invitation-sign-up"><h2>I am new here</h2>${hidden}<input type="hidden" name="email" value="${offer.email}">
<p>Create an account for ${offer.email}</p><label>Choose a password (at least 10 characters) <input type="password" name="password" autocomplete="new-password" minlength="10" required></label>
<button>Create account and join</button></form></div>`;
  }
  return layout(
    `Join ${offer.organization}`,
    session,
    html`<h1>Join ${offer.organization}</h1>${p.error === undefined ? '' : html`<p class="error" role="alert">${p.form === 'sign-up' ? 'Sign-up' : 'Sign-in'}: ${p.error}</p>`}${intro}${way}`,
  );
}
