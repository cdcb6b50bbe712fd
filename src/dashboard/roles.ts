// Who may do what in an account: the roles a member holds and the one table of their permissions. Every
// dashboard route names the permission it needs (route-guards.ts checks it against this table), and
// the pages show only what the role may do. A role missing a permission's entry does not compile.
// The deployment's admin (the operator, users.ts's Role) is apart from this: it sees every account.

export const MEMBER_ROLES = ['owner', 'admin', 'billing', 'member'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/** What each permission allows, in the words the pages and refusals use. */
export const PERMISSION_NAMES = {
  'keys.own': 'create and manage your own API keys',
  'keys.all': "see and manage every member's API keys",
  'keys.defaults': "set the account's default rate limits for keys",
  'usage.own': 'see the usage of your own keys',
  'usage.all': "see the whole account's usage",
  'refunds.request': 'ask for refunds and follow them',
  'billing.view': 'see the balance, the statement and the top-ups',
  'billing.manage': 'add money: top-ups and automatic top-ups',
  'models.view': 'see the models on offer',
  'members.view': 'see the members',
  'members.manage': 'invite, remove and change the roles of members',
  'teams.view': 'see your teams and your own budgets',
  'teams.all': "see every team and every member's budget and spend",
  'teams.manage': "create teams, set their budgets and members, and put any key in a team",
  'budgets.manage': "set members' budgets",
  'organization.manage': "rename the organization",
  'organization.delete': 'delete the organization',
  'ownership.transfer': 'make a member an owner, and transfer ownership',
  'audit.view': "read the account's audit log: who changed what, when, from where",
} as const;
export type Permission = keyof typeof PERMISSION_NAMES;

/** The one table: owner everything; admin members, teams, budgets, keys and the audit log; billing money; member their own keys, usage and budgets. */
export const ROLE_PERMISSIONS = {
  owner: {
    'keys.own': true,
    'keys.all': true,
    'keys.defaults': true,
    'usage.own': true,
    'usage.all': true,
    'refunds.request': true,
    'billing.view': true,
    'billing.manage': true,
    'models.view': true,
    'members.view': true,
    'members.manage': true,
    'teams.view': true,
    'teams.all': true,
    'teams.manage': true,
    'budgets.manage': true,
    'organization.manage': true,
    'organization.delete': true,
    'ownership.transfer': true,
    'audit.view': true,
  },
  admin: {
    'keys.own': true,
    'keys.all': true,
    'keys.defaults': true,
    'usage.own': true,
    'usage.all': true,
    'refunds.request': true,
    'billing.view': true,
    'billing.manage': false,
    'models.view': true,
    'members.view': true,
    'members.manage': true,
    'teams.view': true,
    'teams.all': true,
    'teams.manage': true,
    'budgets.manage': true,
    'organization.manage': false,
    'organization.delete': false,
    'ownership.transfer': false,
    'audit.view': true,
  },
  billing: {
    'keys.own': false,
    'keys.all': false,
    'keys.defaults': false,
    'usage.own': true,
    'usage.all': true,
    'refunds.request': true,
    'billing.view': true,
    'billing.manage': true,
    'models.view': true,
    'members.view': true,
    'members.manage': false,
    'teams.view': true,
    'teams.all': true,
    'teams.manage': false,
    'budgets.manage': false,
    'organization.manage': false,
    'organization.delete': false,
    'ownership.transfer': false,
    'audit.view': false,
  },
  member: {
    'keys.own': true,
    'keys.all': false,
    'keys.defaults': false,
    'usage.own': true,
    'usage.all': false,
    'refunds.request': false,
    'billing.view': false,
    'billing.manage': false,
    'models.view': true,
    'members.view': true,
    'members.manage': false,
    'teams.view': true,
    'teams.all': false,
    'teams.manage': false,
    'budgets.manage': false,
    'organization.manage': false,
    'organization.delete': false,
    'ownership.transfer': false,
    'audit.view': false,
  },
} as const satisfies Record<MemberRole, Record<Permission, boolean>>;

/** What a role is for, in a few words (the Members page and the invitation). */
export const ROLE_SUMMARIES: Record<MemberRole, string> = {
  owner: 'everything, including deleting the organization and transferring ownership',
  admin: 'members, teams and budgets, every key and the usage of all, the audit log; sees the balance',
  billing: 'top-ups, automatic top-ups, the statement and usage',
  member: 'their own keys, their own usage and budgets, and their teams',
};

export function can(role: MemberRole, permission: Permission): boolean {
  return ROLE_PERMISSIONS[role][permission];
}

/** The roles that have a permission (whom to mail about it, what to list). */
export function rolesWith(permission: Permission): MemberRole[] {
  return MEMBER_ROLES.filter((r) => can(r, permission));
}

export function isMemberRole(v: unknown): v is MemberRole {
  return typeof v === 'string' && (MEMBER_ROLES as readonly string[]).includes(v);
}
