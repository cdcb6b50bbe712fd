// The buckets a request draws from: one per declared limit (src/limits/limits.ts), in declaration order,
// each described as data — the hash it is counted in (named under the account's hash tag, so every
// script stays in the account's Redis Cluster slot), where its limit is read, and the fields its spend,
// holds or counts are kept in. The Redis ledger hands this description to its scripts (reserve, settle,
// reap loop over it) and the hold keeps it, so the settlement and the reaper release exactly what the
// reservation took; the memory ledger reads the same description against its own state. Field names
// are those the hot path has always used, so data stored before stays valid.
import { ACCOUNT_LIMIT_FIELDS, KEY_LIMIT_FIELDS } from '../accounts/rate-limits.js';
import { LIMITS, LIMIT_REASONS, type BudgetSetting, type CapSetting, type KeyCapSetting, type LimitReason, type LimitScope, type LimitSpec, type LimitUnit } from '../limits/limits.js';
import type { RateLimitField } from '../accounts/rate-limits.js';

/** The hash fields a key's caps are kept under, in Redis and in the memory ledger's view of a key. */
export const KEY_CAP_FIELDS: Record<KeyCapSetting, string> = { lifetimeCap: 'lifetimeCap', monthlyCap: 'monthlyCap' };
/** The hash fields a team's or member's budgets are kept under, beside its spend. */
export const BUDGET_FIELDS: Record<BudgetSetting, string> = { lifetimeBudget: 'lifetimeBudget', monthlyBudget: 'monthlyBudget' };
const MONEY_SETTING_FIELDS: Record<CapSetting, string> = { ...KEY_CAP_FIELDS, ...BUDGET_FIELDS };

/** Names under the account's hash tag: `<namespace>:{<accountId>}:<name>` in Redis (redis-keys.ts). */
export const SCOPED = {
  account: 'account',
  team: (teamId: string): string => `team:${teamId}`,
  member: (userId: string): string => `member:${userId}`,
  key: (keyId: string): string => `key:${keyId}`,
  /** A key's requests in flight: request ids scored by their hold's deadline. */
  inflight: (keyId: string): string => `inflight:${keyId}`,
};

/**
 * What a request's buckets are found from: the key it was made with, the key's team and the member who
 * owns it (ApiKeyRecord.teamId, .ownerId). A key without a team draws from no team bucket; one the
 * operator made (no owner) from no member bucket.
 */
export interface BucketPath {
  keyId: string;
  teamId?: string;
  memberId?: string;
}

/** The path a reservation or settlement names (ReservationRequest, RequestOfRecord); an empty id is none, as the scripts read it. */
export function requestPath(r: { keyId: string; teamId?: string | undefined; memberId?: string | undefined }): BucketPath {
  return { keyId: r.keyId, ...(r.teamId === undefined || r.teamId === '' ? {} : { teamId: r.teamId }), ...(r.memberId === undefined || r.memberId === '' ? {} : { memberId: r.memberId }) };
}

/** The path of a request made with this key. */
export function pathOfKey(key: { id: string; teamId?: string; ownerId?: string }): BucketPath {
  return { keyId: key.id, ...(key.teamId === undefined ? {} : { teamId: key.teamId }), ...(key.ownerId === undefined ? {} : { memberId: key.ownerId }) };
}

/** Where a limit's value is read: a field of a hash under the account's tag, holding a setting. */
export interface LimitSource {
  scope: LimitScope;
  at: string;
  field: string;
  setting: CapSetting | RateLimitField;
}

interface BucketBase {
  reason: LimitReason;
  unit: LimitUnit;
  /** The hash it is counted in (a sorted set for requests in flight), under the account's tag. */
  at: string;
  /** Where its limit is read, in order: the first that is set is in force (the scope's own, then the account's default). */
  limit: LimitSource[];
}

/** The prepaid balance: money left in `funds`, `held` by requests in flight; a charge draws `funds` down. */
export interface BalanceBucket extends BucketBase {
  kind: 'balance';
  funds: string;
  held: string;
}

/** A cap on spend: spend and holds in `spent` and `held` (with `per: 'month'`, the UTC month `YYYY-MM` appended). */
export interface CapBucket extends BucketBase {
  kind: 'cap';
  spent: string;
  held: string;
  per?: 'month';
}

/**
 * Requests or tokens in a fixed window of Redis's clock: the window's number in `window`, the count in
 * `count`. Counts sharing one window field are kept together (counted whenever any of them is limited).
 * With `giveBack`, the settlement returns what the request did not use of its worst case, in its window.
 */
export interface WindowBucket extends BucketBase {
  kind: 'window';
  window: string;
  count: string;
  giveBack?: true;
}

/** Requests in flight: a sorted set of request ids scored by their hold's deadline (they drop out when it passes). */
export interface InFlightBucket extends BucketBase {
  kind: 'in_flight';
}

export type Bucket = BalanceBucket | CapBucket | WindowBucket | InFlightBucket;
export type BucketKind = Bucket['kind'];

/** How a limit is kept follows from what it is. */
type KindOf<S> = S extends { unit: 'money' } ? (S extends { setting: string } ? 'cap' : 'balance') : S extends { window: 'in_flight' } ? 'in_flight' : 'window';

interface StorageOf {
  balance: { funds: string; held: string };
  cap: { spent: string; held: string };
  window: { window: string; count: string };
  in_flight: { set: (keyId: string) => string };
}

/** Where each limit is kept. A limit declared without its storage here is a compile error. */
const STORAGE: { [R in LimitReason]: StorageOf[KindOf<(typeof LIMITS)[R]>] } = {
  insufficient_balance: { funds: 'balance', held: 'held' },
  // A team's and a member's spend are kept under the names a key's are, each in its own hash.
  team_lifetime_budget_reached: { spent: 'lifetimeSpent', held: 'lifetimeHeld' },
  team_monthly_budget_reached: { spent: 'ms:', held: 'mh:' },
  member_lifetime_budget_reached: { spent: 'lifetimeSpent', held: 'lifetimeHeld' },
  member_monthly_budget_reached: { spent: 'ms:', held: 'mh:' },
  key_lifetime_cap_reached: { spent: 'lifetimeSpent', held: 'lifetimeHeld' },
  key_monthly_cap_reached: { spent: 'ms:', held: 'mh:' },
  rate_limit_requests: { window: 'rlWin', count: 'rlReq' },
  rate_limit_tokens: { window: 'rlWin', count: 'rlTok' },
  rate_limit_concurrency: { set: SCOPED.inflight },
};

function kindOf(spec: LimitSpec): BucketKind {
  if (spec.unit === 'money') return spec.setting === undefined ? 'balance' : 'cap';
  switch (spec.window) {
    case 'in_flight':
      return 'in_flight';
    case 'minute':
      return 'window';
    case 'lifetime':
    case 'month':
      throw new Error(`a ${spec.unit} limit has no ${spec.window} window`);
    default: {
      const never: never = spec.window;
      throw new Error(`unknown window ${String(never)}`);
    }
  }
}

/** The id of the scope on the path; undefined when the path has none (no team, no owner). */
function scopeIdOf(scope: LimitScope, path: BucketPath): string | undefined {
  switch (scope) {
    case 'account':
      return '';
    case 'team':
      return path.teamId;
    case 'member':
      return path.memberId;
    case 'key':
      return path.keyId;
    default: {
      const never: never = scope;
      throw new Error(`unknown scope ${String(never)}`);
    }
  }
}

function scopeAt(scope: LimitScope, path: BucketPath): string {
  switch (scope) {
    case 'account':
      return SCOPED.account;
    case 'team':
      return SCOPED.team(path.teamId ?? '');
    case 'member':
      return SCOPED.member(path.memberId ?? '');
    case 'key':
      return SCOPED.key(path.keyId);
    default: {
      const never: never = scope;
      throw new Error(`unknown scope ${String(never)}`);
    }
  }
}

function sourcesOf(spec: LimitSpec, path: BucketPath): LimitSource[] {
  if (spec.unit === 'money') {
    if (spec.setting === undefined) return [];
    return [{ scope: spec.scope, at: scopeAt(spec.scope, path), field: MONEY_SETTING_FIELDS[spec.setting], setting: spec.setting }];
  }
  const own: LimitSource = { scope: spec.scope, at: scopeAt(spec.scope, path), field: KEY_LIMIT_FIELDS[spec.setting], setting: spec.setting };
  if (!spec.accountDefault) return [own];
  return [own, { scope: 'account', at: SCOPED.account, field: ACCOUNT_LIMIT_FIELDS[spec.setting], setting: spec.setting }];
}

function bucketOf(reason: LimitReason, path: BucketPath): Bucket {
  const spec: LimitSpec = LIMITS[reason];
  const base = { reason, unit: spec.unit, at: scopeAt(spec.scope, path), limit: sourcesOf(spec, path) };
  // The storage's type follows the limit's kind (checked above at compile time); read here by kind.
  const storage = STORAGE[reason] as Partial<StorageOf['balance'] & StorageOf['cap'] & StorageOf['window'] & StorageOf['in_flight']>;
  const kind = kindOf(spec);
  const field = (name: string | undefined): string => {
    if (name === undefined) throw new Error(`the storage of ${reason} lacks a field of a ${kind} bucket`);
    return name;
  };
  switch (kind) {
    case 'balance':
      return { ...base, kind, funds: field(storage.funds), held: field(storage.held) };
    case 'cap':
      return { ...base, kind, spent: field(storage.spent), held: field(storage.held), ...(spec.window === 'month' ? { per: 'month' as const } : {}) };
    case 'window':
      return { ...base, kind, window: field(storage.window), count: field(storage.count), ...(spec.unit === 'tokens' ? { giveBack: true as const } : {}) };
    case 'in_flight': {
      if (storage.set === undefined) throw new Error(`the storage of ${reason} lacks its set`);
      return { ...base, kind, at: storage.set(path.keyId) };
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown bucket kind ${String(never)}`);
    }
  }
}

/** The buckets a request made with this path draws from, in declaration order: every limit of a scope on the path. */
export function bucketsOf(path: BucketPath): Bucket[] {
  const out: Bucket[] = [];
  for (const reason of LIMIT_REASONS) if (scopeIdOf(LIMITS[reason].scope, path) !== undefined) out.push(bucketOf(reason, path));
  return out;
}

/** A bucket's field for a month: monthly spend and holds are kept per UTC month. */
export function fieldFor(bucket: CapBucket, name: 'spent' | 'held', month: string): string {
  return bucket.per === 'month' ? `${bucket[name]}${month}` : bucket[name];
}

/**
 * The description the Lua scripts read (lua/buckets.lua): each bucket as these slots, bucket after
 * bucket, read by position. Not JSON: Redis spends its CPU on the scripts, and cjson took 6–9 µs a
 * decode, twice a reserve+settle pair; a flat table of constants costs them under 1 µs.
 * - The scripts carry every declared limit's bucket (DECLARED, declaredBucketsLua) with its names left
 *   to complete: a name is its slot followed by the id of the scope in the slot after it (`atId`:
 *   'key', 'team', 'member'; '' when the name is complete, the account's). A request sends its ids;
 *   the buckets of scopes it has no id for (no team, no owner) are not on its path.
 * - A hold keeps its buckets with complete names (bucketsHeld): what its settlement and the reaper
 *   release, whatever the gateway declares by then. A settlement whose hold kept what the gateway
 *   describes now reads the declared buckets instead of the hold's copy.
 * `field1`, `field2`: the balance's funds and held, a cap's spent and held, a window's window and count;
 * `flag`: 'month' for a cap kept per UTC month, 'giveBack' for a window that gets back what a request
 * did not use; the limit's sources (the first set one in force), '' where there is none.
 */
export const BUCKET_SLOTS = ['kind', 'unit', 'reason', 'at', 'atId', 'field1', 'field2', 'flag', 'limitAt', 'limitId', 'limitField', 'defaultAt', 'defaultId', 'defaultField'] as const;
/** Between the slots of the copy a hold keeps (bucketsHeld): no name a bucket is kept under contains it. */
export const HELD_SEPARATOR = '\n';

function fieldSlotsOf(b: Bucket): [string, string, string] {
  switch (b.kind) {
    case 'balance':
      return [b.funds, b.held, ''];
    case 'cap':
      return [b.spent, b.held, b.per ?? ''];
    case 'window':
      return [b.window, b.count, b.giveBack === true ? 'giveBack' : ''];
    case 'in_flight':
      return ['', '', ''];
    default: {
      const never: never = b;
      throw new Error(`unknown bucket ${JSON.stringify(never)}`);
    }
  }
}

/** A bucket's slots; with `templates`, each name (made with empty ids) followed by whose id completes it. */
function slotsOf(b: Bucket, templates: boolean): string[] {
  const [own, fallback, extra] = b.limit;
  if (extra !== undefined) throw new Error(`${b.reason}: a bucket's description has room for two sources of its limit`);
  const idOf = (scope: LimitScope | undefined): string => (templates && scope !== undefined && scope !== 'account' ? scope : '');
  return [
    b.kind, b.unit, b.reason, b.at, idOf(LIMITS[b.reason].scope), ...fieldSlotsOf(b),
    own?.at ?? '', idOf(own?.scope), own?.field ?? '', fallback?.at ?? '', idOf(fallback?.scope), fallback?.field ?? '',
  ];
}

const NO_IDS: BucketPath = { keyId: '', teamId: '', memberId: '' };

/** A slot's name in the scripts: `atId` is AT_ID, `field1` FIELD1. */
export function luaSlotName(slot: (typeof BUCKET_SLOTS)[number]): string {
  return slot.replace(/([A-Z])/g, '_$1').toUpperCase();
}

/**
 * What the scripts start with (scripts.ts writes it above lua/buckets.lua): the slots' positions by
 * name (SLOTS, KIND = 1 … DEFAULT_FIELD), and every declared limit's bucket, in declaration order, as
 * the Lua table DECLARED. Both from here, so the slots are declared once.
 */
export function declaredBucketsLua(): string {
  const slots = LIMIT_REASONS.flatMap((reason) => slotsOf(bucketOf(reason, NO_IDS), true));
  for (const slot of slots) if (!/^[\w:.-]*$/.test(slot)) throw new Error(`a bucket slot the scripts cannot quote: ${JSON.stringify(slot)}`);
  return [
    `local SLOTS = ${BUCKET_SLOTS.length}`,
    `local ${BUCKET_SLOTS.map(luaSlotName).join(', ')} = ${BUCKET_SLOTS.map((_, i) => i + 1).join(', ')}`,
    `local DECLARED = {${slots.map((slot) => `'${slot}'`).join(', ')}}`,
  ].join('\n');
}

/** The copy of its buckets a hold keeps: their slots with complete names, in one string. */
export function bucketsHeld(buckets: readonly Bucket[]): string {
  const slots: string[] = [];
  for (const b of buckets) {
    // Only names carry data (ids); a separator in one would shift the slots after it.
    if (b.at.includes(HELD_SEPARATOR)) throw new RangeError(`a bucket name holds a line break: ${JSON.stringify(b.at)}`);
    slots.push(...slotsOf(b, false));
  }
  return slots.join(HELD_SEPARATOR);
}

/** Every hash a bucket names, for a script's declared keys. */
export function bucketHashes(buckets: readonly Bucket[]): string[] {
  const names = new Set<string>();
  for (const b of buckets) {
    names.add(b.at);
    for (const s of b.limit) names.add(s.at);
  }
  return [...names];
}

/**
 * The fields a key's, a team's or a member's spend is read from (KeySpend): the lifetime and monthly
 * buckets of each scope keep them under these names in the scope's own hash.
 */
export const KEY_SPEND_FIELDS = {
  lifetimeSpent: STORAGE.key_lifetime_cap_reached.spent,
  lifetimeHeld: STORAGE.key_lifetime_cap_reached.held,
  monthSpent: (month: string): string => `${STORAGE.key_monthly_cap_reached.spent}${month}`,
  monthHeld: (month: string): string => `${STORAGE.key_monthly_cap_reached.held}${month}`,
};
