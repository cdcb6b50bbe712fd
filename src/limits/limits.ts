// Every limit a request can be refused by, declared once: what it limits (its scope and window), what it
// counts, where its value is set, how a refusal by it is answered (HTTP status and the words a person can
// act on, the same in every client format's error body) and how it is labelled in the metrics and on the
// dashboard. The ledgers draw a request from one bucket per limit, in this order (src/billing/buckets.ts),
// and admit it by one rule (admission.ts). Adding a limit is a row here; the types below make the
// compiler list whatever else it lacks (its storage in src/billing/buckets.ts).
import type { RateLimitField } from '../accounts/rate-limits.js';
import type { BudgetScope } from '../accounts/account-store.js';

export type { BudgetScope };

/**
 * Whose limit it is: the account (its prepaid balance), a team of the account (its keys' spend), a member
 * (the spend of the keys they own in the account), an API key.
 */
export type LimitScope = 'account' | BudgetScope | 'key';

/**
 * Over what it counts: the scope's whole life, the calendar month (UTC), a fixed window of the rate
 * limits (a minute unless configured), the requests in flight now.
 */
export type LimitWindow = 'lifetime' | 'month' | 'minute' | 'in_flight';

/**
 * What it counts. Limits of one unit are weighed together: the one with the least left binds. Units are
 * checked in the order their first limit is declared (money first: a 402 before a 429).
 */
export type LimitUnit = 'money' | 'requests' | 'tokens' | 'concurrent_requests';

/** Where a key's cap is set (the account store's KeyCaps). */
export type KeyCapSetting = 'lifetimeCap' | 'monthlyCap';
/** Where a team's or a member's budget is set (the account store's ScopeBudgets). */
export type BudgetSetting = 'lifetimeBudget' | 'monthlyBudget';
/** Where a limit of money is set on its scope. */
export type CapSetting = KeyCapSetting | BudgetSetting;

interface LimitBase {
  scope: LimitScope;
  window: LimitWindow;
  /** The `reason` label of `tollgate_reservations_total{outcome="refused"}`. */
  metricLabel: string;
  /** How the Usage page names a refusal by it. */
  dashboardLabel: string;
}

/** What a refusal by a limit of money can name: the limit and whose it is. */
export interface MoneyRefusalFacts {
  /** The limit in force, in USD as the answer writes it ("500.00"); '' for the balance. */
  limit: string;
  /** The name of the scope the limit is set on (a team's), '' when it has none. */
  scopeName: string;
  /** The account's name (an organization's), '' when it has none. */
  accountName: string;
}

/** A limit of money: a refusal is a 402 with the worst case, what is left and how to get room. */
export interface MoneyLimit extends LimitBase {
  unit: 'money';
  status: 402;
  /** Where its value is set on its scope; none for the balance, which is the money on the account. */
  setting?: CapSetting;
  wording: {
    /** Says what refused; the refusal adds the worst case and what is left in USD. */
    refused: (f: MoneyRefusalFacts) => string;
    /** What the person can do when no smaller output limit would fit. */
    remedy: string;
    /** The whole sentence when the limit has nothing left at all (its remedy in it); absent: `refused` as when some is left. */
    usedUp?: (f: MoneyRefusalFacts) => string;
  };
}

/** What a rate-limit refusal says, in numbers the wording puts in its sentence. */
export interface RateRefusalFacts {
  /** The limit in force (the scope's own, else the account's default). */
  limit: number;
  /** Its window in words: "per minute", "per 2 s". */
  per: string;
  /** What the request counts against it (1 request; its worst-case tokens). */
  needed: number;
  /** What the limit had left. */
  available: number;
  /** When to retry, in words: "retry in 1.5 s". */
  retry: string;
  /** The request field that limits output (max_tokens, max_output_tokens). */
  outputLimitField: string;
}

/** A limit of requests or tokens: a refusal is a 429 with the family's rate-limit headers and Retry-After. */
export interface RateLimit extends LimitBase {
  unit: 'requests' | 'tokens' | 'concurrent_requests';
  status: 429;
  /** Where its value is set on its scope (and on the account, as the default for its keys). */
  setting: RateLimitField;
  /** The account's default applies to a scope that sets none of its own. */
  accountDefault: boolean;
  wording: {
    /** The sentence of a refusal worth retrying. */
    refused: (f: RateRefusalFacts) => string;
    /** The sentence when the request alone is over the limit, so no retry can succeed. */
    neverFits?: (f: RateRefusalFacts) => string;
  };
}

export type LimitSpec = MoneyLimit | RateLimit;

/**
 * The family of rate-limit headers a rate limit is reported in (each client format's headers, and the
 * `limit_type` of its 429), by what it counts.
 */
export function rateLimitFamily(unit: RateLimit['unit']): 'requests' | 'tokens' | 'concurrency' {
  switch (unit) {
    case 'requests':
      return 'requests';
    case 'tokens':
      return 'tokens';
    case 'concurrent_requests':
      return 'concurrency';
    default: {
      const never: never = unit;
      throw new Error(`unknown unit ${String(never)}`);
    }
  }
}

/** "The search team's", or the key's team when its name is not known. */
const theTeams = (f: MoneyRefusalFacts): string => (f.scopeName === '' ? "This key's team's" : `The ${f.scopeName} team's`);
/** " in Acme": the account a member's budget is set in, when it has a name. */
const inAccount = (f: MoneyRefusalFacts): string => (f.accountName === '' ? '' : ` in ${f.accountName}`);

// In declaration order (the order ties are broken in): the account's balance, then its teams, its members
// and the key itself, each lifetime before month; then the rate limits.
export const LIMITS = {
  insufficient_balance: {
    scope: 'account',
    // The balance is what is left of all the money the account ever had.
    window: 'lifetime',
    unit: 'money',
    status: 402,
    wording: { refused: () => 'The account balance is too low for this request', remedy: 'Top up the balance in the dashboard.' },
    metricLabel: 'insufficient_balance',
    dashboardLabel: 'refused: balance too low',
  },
  team_lifetime_budget_reached: {
    scope: 'team',
    window: 'lifetime',
    unit: 'money',
    status: 402,
    setting: 'lifetimeBudget',
    wording: {
      refused: (f) => `${theTeams(f)} lifetime budget of ${f.limit} USD is too close to be reached for this request`,
      usedUp: (f) => `${theTeams(f)} lifetime budget of ${f.limit} USD is used up; an owner or admin can raise it in the dashboard.`,
      remedy: 'An owner or admin can raise it in the dashboard.',
    },
    metricLabel: 'team_lifetime_budget_reached',
    dashboardLabel: 'refused: team lifetime budget',
  },
  team_monthly_budget_reached: {
    scope: 'team',
    window: 'month',
    unit: 'money',
    status: 402,
    setting: 'monthlyBudget',
    wording: {
      refused: (f) => `${theTeams(f)} monthly budget of ${f.limit} USD is too close to be reached for this request`,
      usedUp: (f) => `${theTeams(f)} monthly budget of ${f.limit} USD is used up; an owner or admin can raise it in the dashboard.`,
      remedy: 'An owner or admin can raise it in the dashboard.',
    },
    metricLabel: 'team_monthly_budget_reached',
    dashboardLabel: 'refused: team monthly budget',
  },
  member_lifetime_budget_reached: {
    scope: 'member',
    window: 'lifetime',
    unit: 'money',
    status: 402,
    setting: 'lifetimeBudget',
    wording: {
      refused: (f) => `Your lifetime budget of ${f.limit} USD${inAccount(f)} is too close to be reached for this request`,
      usedUp: (f) => `Your lifetime budget of ${f.limit} USD${inAccount(f)} is used up; ask an owner or admin to raise it.`,
      remedy: 'Ask an owner or admin to raise it in the dashboard.',
    },
    metricLabel: 'member_lifetime_budget_reached',
    dashboardLabel: 'refused: member lifetime budget',
  },
  member_monthly_budget_reached: {
    scope: 'member',
    window: 'month',
    unit: 'money',
    status: 402,
    setting: 'monthlyBudget',
    wording: {
      refused: (f) => `Your monthly budget of ${f.limit} USD${inAccount(f)} is too close to be reached for this request`,
      usedUp: (f) => `Your monthly budget of ${f.limit} USD${inAccount(f)} is used up; ask an owner or admin to raise it.`,
      remedy: 'Ask an owner or admin to raise it in the dashboard.',
    },
    metricLabel: 'member_monthly_budget_reached',
    dashboardLabel: 'refused: member monthly budget',
  },
  key_lifetime_cap_reached: {
    scope: 'key',
    window: 'lifetime',
    unit: 'money',
    status: 402,
    setting: 'lifetimeCap',
    wording: {
      refused: () => "This key's lifetime spending cap is too close to be reached for this request",
      remedy: 'Raise or clear the cap in the dashboard, or use another key.',
    },
    metricLabel: 'key_lifetime_cap_reached',
    dashboardLabel: 'refused: key lifetime cap',
  },
  key_monthly_cap_reached: {
    scope: 'key',
    window: 'month',
    unit: 'money',
    status: 402,
    setting: 'monthlyCap',
    wording: {
      refused: () => "This key's monthly spending cap is too close to be reached for this request",
      remedy: 'Raise or clear the cap in the dashboard, or use another key.',
    },
    metricLabel: 'key_monthly_cap_reached',
    dashboardLabel: 'refused: key monthly cap',
  },
  rate_limit_requests: {
    scope: 'key',
    window: 'minute',
    unit: 'requests',
    status: 429,
    setting: 'requestsPerMinute',
    accountDefault: true,
    wording: { refused: (f) => `This API key's limit of ${f.limit} requests ${f.per} is reached; ${f.retry}.` },
    metricLabel: 'rate_limit_requests',
    dashboardLabel: 'refused: key requests per minute',
  },
  rate_limit_tokens: {
    scope: 'key',
    window: 'minute',
    unit: 'tokens',
    status: 429,
    setting: 'tokensPerMinute',
    accountDefault: true,
    wording: {
      refused: (f) => `This API key's limit of ${f.limit} tokens ${f.per} is reached: this request counts up to ${f.needed} and ${f.available} are left; ${f.retry}.`,
      neverFits: (f) =>
        `This request counts up to ${f.needed} tokens (its input and the reserved ${f.outputLimitField}), more than this API key's limit of ${f.limit} tokens ${f.per}; lower ${f.outputLimitField} or ask for a higher limit.`,
    },
    metricLabel: 'rate_limit_tokens',
    dashboardLabel: 'refused: key tokens per minute',
  },
  rate_limit_concurrency: {
    scope: 'key',
    window: 'in_flight',
    unit: 'concurrent_requests',
    status: 429,
    setting: 'concurrentRequests',
    accountDefault: true,
    wording: { refused: (f) => `This API key already has ${f.limit} requests in flight, its limit; retry when one has finished.` },
    metricLabel: 'rate_limit_concurrency',
    dashboardLabel: 'refused: key requests at once',
  },
} as const satisfies Record<string, LimitSpec>;

/** A refusal by a limit: the limit's name. */
export type LimitReason = keyof typeof LIMITS;
/** Every limit, in declaration order: the order a request's buckets are read and ties are broken in. */
export const LIMIT_REASONS = Object.keys(LIMITS) as LimitReason[];

/** A refusal by one of the rate limits (429). */
export type RateLimitReason = { [R in LimitReason]: (typeof LIMITS)[R]['status'] extends 429 ? R : never }[LimitReason];

/** Refusals of the key itself, before any limit is weighed: answered 401 like a bad key at the door. */
export interface KeyRefusalSpec {
  status: 401;
  /** The error code clients get. */
  code: string;
  /** Says what is wrong; the answer adds how to get a working key. */
  wording: string;
  metricLabel: string;
}

export const KEY_REFUSALS = {
  key_revoked: { status: 401, code: 'revoked_api_key', wording: 'This API key was revoked', metricLabel: 'key_revoked' },
  unknown_key: { status: 401, code: 'invalid_api_key', wording: 'This API key no longer exists', metricLabel: 'unknown_key' },
} as const satisfies Record<string, KeyRefusalSpec>;

export type KeyRefusalReason = keyof typeof KEY_REFUSALS;

/** Every reason a reservation can be refused for. */
export type RefusalReason = LimitReason | KeyRefusalReason;
export const REFUSAL_REASONS: readonly RefusalReason[] = [...LIMIT_REASONS, ...(Object.keys(KEY_REFUSALS) as KeyRefusalReason[])];

export function isLimitReason(reason: string): reason is LimitReason {
  return Object.hasOwn(LIMITS, reason);
}

export function isRefusalReason(reason: string): reason is RefusalReason {
  return isLimitReason(reason) || Object.hasOwn(KEY_REFUSALS, reason);
}

export function isRateLimitReason(reason: RefusalReason): reason is RateLimitReason {
  return isLimitReason(reason) && LIMITS[reason].status === 429;
}

/** The metric label of any refusal. */
export function refusalMetricLabel(reason: RefusalReason): string {
  return isLimitReason(reason) ? LIMITS[reason].metricLabel : KEY_REFUSALS[reason].metricLabel;
}
