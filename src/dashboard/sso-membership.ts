// Just-in-time membership: what the provider says about a person (address, groups) decides, at every
// SSO sign-in, which of the mapped organizations they belong to and in which role. The first sign-in
// makes the user (without a usable password) and the organizations the mapping names; a role changed
// at the provider applies at the next sign-in; a person no rule admits any more is refused, removed
// from the mapped organizations (their keys there revoked, as a removal by an owner does) and signed
// out everywhere. Memberships the provider does not manage (personal accounts, organizations made in
// the dashboard) are left alone.
import { randomBytes } from 'node:crypto';
import { hash } from '@node-rs/argon2';
import type { AccountService } from '../account-service/account-service.js';
import type { Database, Queryable } from '../record/database.js';
import type { KeyService } from './keys.js';
import { MEMBER_ROLES, type MemberRole } from './roles.js';
import { domainOf, type SsoConfig, type SsoRule } from './sso-config.js';
import { SsoRefusal, type SsoClaims } from './sso-provider.js';
import { findUser, findUserById, insertUser, normalizeEmail, userOf, type User } from './users.js';

/** The most a role may do comes first: several rules naming one organization give the strongest. */
const strength = (r: MemberRole): number => MEMBER_ROLES.length - MEMBER_ROLES.indexOf(r);

/** The role per organization the rules give a person of this address and these groups. */
export function rolesFor(rules: readonly SsoRule[], email: string, groups: readonly string[]): Map<string, MemberRole> {
  const domain = domainOf(email);
  const roles = new Map<string, MemberRole>();
  for (const rule of rules) {
    const applies = 'group' in rule ? groups.includes(rule.group) : rule.domain === domain;
    const had = roles.get(rule.organization);
    if (applies && (had === undefined || strength(rule.role) > strength(had))) roles.set(rule.organization, rule.role);
  }
  return roles;
}

export interface Admitted {
  user: User;
  /** The account the new session acts on: the first mapped organization by name. */
  accountId: string;
}

export class SsoMembership {
  constructor(private readonly opts: { db: Database; accounts: AccountService; keys: KeyService; config: SsoConfig }) {}

  /** The person as a dashboard user with their mapped memberships, or a refusal that says why not. */
  async admit(claims: SsoClaims): Promise<Admitted> {
    const { config } = this.opts;
    if (claims.email === undefined) throw new SsoRefusal(403, `${config.name} sent no e-mail address (the "email" claim). Ask whoever runs it to release the email scope to Tollgate.`);
    let email: string;
    try {
      email = normalizeEmail(claims.email);
    } catch {
      throw new SsoRefusal(403, `${config.name} sent an address Tollgate cannot use (${claims.email}).`);
    }
    if (claims.emailVerified === false) throw new SsoRefusal(403, `${config.name} says ${email} is not verified; verify it there first.`);
    if (!config.domains.includes(domainOf(email))) throw new SsoRefusal(403, `${email} is not in a domain this Tollgate signs in through ${config.name} (${config.domains.join(', ')}).`);
    const roles = rolesFor(config.rules, email, claims.groups);
    const known = await this.linkedUser(claims);
    if (roles.size === 0) {
      // The provider still authenticates them, but no rule lets them in: out of the mapped organizations, and signed out.
      if (known !== undefined) await this.leaveAllBut(known.id, new Map());
      throw new SsoRefusal(403, `Your account at ${config.name} (${email}) is not given access to Tollgate: none of your groups or your domain is mapped to an organization. Ask whoever runs ${config.name} to add you.`);
    }
    const user = known ?? (await this.userFor(email));
    await this.link(claims, user, email);
    const organizations = await this.organizationsFor([...roles.keys()], user.id);
    await this.leaveAllBut(user.id, new Map([...roles].map(([name, role]) => [organizations.get(name) as string, role])));
    const first = [...roles.keys()].sort((a, b) => a.localeCompare(b))[0] as string;
    return { user: userOf((await findUserById(this.opts.db, user.id)) ?? fail(email)), accountId: organizations.get(first) as string };
  }

  /** The user this issuer's subject was linked to at an earlier sign-in. */
  private async linkedUser(claims: SsoClaims): Promise<User | undefined> {
    const r = await this.opts.db.query<{ user_id: string }>('SELECT user_id FROM sso_identities WHERE issuer = $1 AND subject = $2', [claims.issuer, claims.subject]);
    const id = r.rows[0]?.user_id;
    const row = id === undefined ? undefined : await findUserById(this.opts.db, id);
    return row === undefined ? undefined : userOf(row);
  }

  /** The existing user of the address (the provider serves its domain), or a new one without a usable password. */
  private async userFor(email: string): Promise<User> {
    const existing = await findUser(this.opts.db, email);
    if (existing !== undefined) {
      if (existing.role === 'admin') throw new SsoRefusal(403, `${email} is this Tollgate's operator account, which signs in with its password, not through ${this.opts.config.name}.`);
      return userOf(existing);
    }
    // A hash of a password nobody knows: password sign-in can never succeed for this user.
    const passwordHash = await hash(randomBytes(32).toString('base64url'));
    const account = await this.opts.accounts.createAccount(email);
    const created = await this.opts.db.transaction((tx) => insertUser(tx, { email, passwordHash, role: 'holder', accountId: account.id, confirmed: true }));
    // Two first sign-ins at once: the unique address decides; the loser's empty account stays unused.
    if (created !== undefined) return created;
    const row = (await findUser(this.opts.db, email)) ?? fail(email);
    return userOf(row);
  }

  /** Records the issuer and subject as this user's (the provider vouched for the address: it counts as confirmed). */
  private async link(claims: SsoClaims, user: User, email: string): Promise<void> {
    await this.opts.db.transaction(async (tx) => {
      const other = await tx.query<{ subject: string }>('SELECT subject FROM sso_identities WHERE issuer = $1 AND user_id = $2 AND subject <> $3', [claims.issuer, user.id, claims.subject]);
      if (other.rows.length > 0) throw new SsoRefusal(403, `${user.email} is already linked to another person at ${this.opts.config.name}; ask the operator.`);
      await tx.query(
        `INSERT INTO sso_identities (issuer, subject, user_id, email, groups) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (issuer, subject) DO UPDATE SET email = EXCLUDED.email, groups = EXCLUDED.groups, last_sign_in_at = now()`,
        [claims.issuer, claims.subject, user.id, email, claims.groups],
      );
      await tx.query('UPDATE dashboard_users SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1', [user.id]);
    });
  }

  /** The account of each mapped organization, made (with `creatorId` as its creator) the first time one is named. */
  private async organizationsFor(names: readonly string[], creatorId: string): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const name of names) {
      const live = await this.opts.db.query<{ account_id: string; deleted: boolean }>(
        'SELECT s.account_id, o.deleted_at IS NOT NULL AS deleted FROM sso_organizations s JOIN organizations o ON o.account_id = s.account_id WHERE s.name = $1',
        [name],
      );
      const row = live.rows[0];
      if (row !== undefined && !row.deleted) {
        found.set(name, row.account_id);
        continue;
      }
      // Deleted in the dashboard: the next sign-in that maps to it starts a new one (the old one's record stays).
      if (row !== undefined) await this.opts.db.query('DELETE FROM sso_organizations WHERE name = $1 AND account_id = $2', [name, row.account_id]);
      const account = await this.opts.accounts.createAccount(name);
      const made = await this.opts.db.transaction(async (tx) => {
        const claimed = await tx.query<{ account_id: string }>('INSERT INTO sso_organizations (name, account_id) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING account_id', [name, account.id]);
        if (claimed.rows.length === 0) return (await tx.query<{ account_id: string }>('SELECT account_id FROM sso_organizations WHERE name = $1', [name])).rows[0]?.account_id;
        await tx.query('INSERT INTO organizations (account_id, name, created_by) VALUES ($1, $2, $3)', [account.id, name.slice(0, 100), creatorId]);
        return account.id;
      });
      if (made === undefined) throw new Error(`SSO organization ${name} vanished`);
      found.set(name, made);
    }
    return found;
  }

  /**
   * The user's memberships in the provider's organizations become exactly `wanted` (account to role):
   * roles set, memberships added, and every other membership there removed with the keys made in it.
   * An empty `wanted` also ends every session of the user.
   */
  private async leaveAllBut(userId: string, wanted: Map<string, MemberRole>): Promise<void> {
    const left = await this.opts.db.transaction(async (tx) => {
      for (const [accountId, role] of wanted) {
        await tx.query('INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT (account_id, user_id) DO UPDATE SET role = EXCLUDED.role', [accountId, userId, role]);
      }
      const gone = await tx.query<{ account_id: string }>(
        'DELETE FROM account_memberships m USING sso_organizations s WHERE m.account_id = s.account_id AND m.user_id = $1 AND NOT (m.account_id = ANY($2)) RETURNING m.account_id',
        [userId, [...wanted.keys()]],
      );
      for (const { account_id } of gone.rows) await leaveTeams(tx, account_id, userId);
      if (wanted.size === 0) await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [userId]);
      return gone.rows.map((r) => r.account_id);
    });
    for (const accountId of left) await this.opts.keys.revokeKeysOf(accountId, userId);
  }
}

/** Out of the account's teams too, as Organizations.remove does (budgets of record stay beside their usage). */
async function leaveTeams(tx: Queryable, accountId: string, userId: string): Promise<void> {
  await tx.query('DELETE FROM team_members m USING teams t WHERE t.id = m.team_id AND t.account_id = $1 AND m.user_id = $2', [accountId, userId]);
}

function fail(email: string): never {
  throw new Error(`dashboard user ${email} vanished`);
}
