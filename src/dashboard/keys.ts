// API keys as the dashboard manages them, for the member acting on an account: a member sees and
// manages the keys they made; owners and admins (keys.all) every key of the account. A key another
// member may not see answers as one that does not exist. Secrets are shown once, at creation.
import type { ApiKeyRecord, KeyCaps, KeyChange, KeyRequestCeiling } from '../accounts/account-store.js';
import type { RateLimits } from '../accounts/rate-limits.js';
import type { AccountService } from '../account-service/account-service.js';
import type { Database } from '../record/database.js';
import { allowed, requirePermission, type Actor } from './actor.js';
import { DashboardError } from './errors.js';
import { Identity } from './identity.js';
import type { TeamsService } from './teams.js';

export interface KeyView {
  id: string;
  name: string;
  displayHint: string;
  createdAt: number;
  state: 'active' | 'revoked';
  revokedAt?: number;
  lifetimeCap?: number;
  monthlyCap?: number;
  /** The key's default cost ceiling per request, micro-USD. */
  maxCostPerRequest?: number;
  lifetimeSpent: number;
  monthSpent: number;
  held: number;
  /** Unix ms of the key's last request of record. */
  lastUsedAt?: number;
  /** The key's own rate limits (each overrides the account's default for keys). */
  rateLimits?: RateLimits;
  /** The member who made it (user id and address); undefined for the operator's keys. */
  owner?: { id: string; email: string };
  /** The team it is in (its requests draw from the team's budgets too); undefined for none. */
  team?: { id: string; name: string };
}

const NO_SUCH_KEY = 'No such key in this account.';

export class KeyService {
  constructor(private readonly opts: { db: Database; accounts: AccountService; teams: TeamsService }) {}

  /** Whether the actor may see and manage this key: any of the account's with keys.all, else their own. */
  private static mayManage(actor: Actor, k: ApiKeyRecord): boolean {
    return k.accountId === actor.member.accountId && (allowed(actor, 'keys.all') || k.ownerId === actor.user.id);
  }

  private async view(k: ApiKeyRecord, owners: Map<string, string>, teams: Map<string, string>): Promise<KeyView> {
    const spend = await this.opts.accounts.keySpend(k.accountId, k.id);
    const ownerEmail = k.ownerId === undefined ? undefined : owners.get(k.ownerId);
    const teamName = k.teamId === undefined ? undefined : teams.get(k.teamId);
    return {
      id: k.id,
      name: k.name,
      displayHint: k.displayHint,
      createdAt: k.createdAt,
      state: k.revokedAt === undefined ? 'active' : 'revoked',
      ...(k.revokedAt === undefined ? {} : { revokedAt: k.revokedAt }),
      ...(k.lifetimeCap === undefined ? {} : { lifetimeCap: k.lifetimeCap }),
      ...(k.monthlyCap === undefined ? {} : { monthlyCap: k.monthlyCap }),
      ...(k.maxCostPerRequest === undefined ? {} : { maxCostPerRequest: k.maxCostPerRequest }),
      lifetimeSpent: spend.lifetimeSpent,
      monthSpent: spend.monthSpent,
      held: spend.lifetimeHeld,
      ...(k.rateLimits === undefined ? {} : { rateLimits: k.rateLimits }),
      ...(k.ownerId === undefined || ownerEmail === undefined ? {} : { owner: { id: k.ownerId, email: ownerEmail } }),
      ...(k.teamId === undefined || teamName === undefined ? {} : { team: { id: k.teamId, name: teamName } }),
    };
  }

  /** The addresses of the members who made these keys. */
  private async owners(keys: readonly ApiKeyRecord[]): Promise<Map<string, string>> {
    const ids = [...new Set(keys.flatMap((k) => (k.ownerId === undefined ? [] : [k.ownerId])))];
    if (ids.length === 0) return new Map();
    const r = await this.opts.db.query<{ id: string; email: string }>('SELECT id, email FROM dashboard_users WHERE id = ANY($1)', [ids]);
    return new Map(r.rows.map((row) => [row.id, row.email]));
  }

  /** The keys the actor may see, newest first. */
  async listKeys(actor: Actor): Promise<KeyView[]> {
    const keys = (await this.opts.accounts.listKeys(actor.member.accountId)).filter((k) => KeyService.mayManage(actor, k));
    keys.sort((a, b) => b.createdAt - a.createdAt);
    const used = await this.opts.db.query<{ key_id: string; last_ms: number }>(
      'SELECT key_id, (extract(epoch FROM max(finished_at)) * 1000)::bigint AS last_ms FROM usage_records WHERE account_id = $1 GROUP BY key_id',
      [actor.member.accountId],
    );
    const last = new Map(used.rows.map((r) => [r.key_id, Number(r.last_ms)]));
    const owners = await this.owners(keys);
    const teams = await this.opts.teams.names(actor.member.accountId);
    return Promise.all(
      keys.map(async (k) => {
        const v = await this.view(k, owners, teams);
        const at = last.get(k.id);
        return at === undefined ? v : { ...v, lastUsedAt: at };
      }),
    );
  }

  /** The keys whose usage the actor sees (every key of the account with usage.all, else their own), and whether that is all. */
  async usageKeys(actor: Actor): Promise<{ keys: Array<{ id: string; name: string; ownerId?: string; teamId?: string }>; all: boolean }> {
    const all = allowed(actor, 'usage.all');
    const keys = (await this.opts.accounts.listKeys(actor.member.accountId)).filter((k) => all || k.ownerId === actor.user.id);
    return { keys: keys.map((k) => ({ id: k.id, name: k.name, ...(k.ownerId === undefined ? {} : { ownerId: k.ownerId }), ...(k.teamId === undefined ? {} : { teamId: k.teamId }) })), all };
  }

  /** The key if the actor may manage it; otherwise the same 404 as a key that does not exist. */
  async getKey(actor: Actor, keyId: string): Promise<KeyView> {
    const k = await this.opts.accounts.getKey(actor.member.accountId, keyId);
    if (k === undefined || !KeyService.mayManage(actor, k)) throw new DashboardError(404, NO_SUCH_KEY);
    return this.view(k, await this.owners([k]), await this.opts.teams.names(actor.member.accountId));
  }

  /**
   * A new key of the account, owned by the actor, in `teamId` when given (one the actor may put their
   * keys in); its secret is returned this once.
   */
  async createKey(actor: Actor, name: unknown, caps: KeyCaps & KeyRequestCeiling, rateLimits: RateLimits = {}, teamId?: string): Promise<{ key: KeyView; secret: string }> {
    Identity.requireConfirmed(actor.user);
    const keyName = typeof name === 'string' && name.trim() !== '' ? name.trim() : 'unnamed';
    if (keyName.length > 100) throw new DashboardError(400, 'A key name has at most 100 characters.');
    if (teamId !== undefined) await this.opts.teams.checkKeyTeam(actor, actor.user.id, teamId);
    const created = await this.opts.accounts.createKey(actor.member.accountId, { name: keyName, ...caps, rateLimits, ownerId: actor.user.id, ...(teamId === undefined ? {} : { teamId }) });
    // Removed (or the organization deleted) while this key was being made: the removal's sweep of the
    // member's keys may have run before it existed, so it is revoked here.
    const still = await this.opts.db.query('SELECT 1 FROM account_memberships WHERE account_id = $1 AND user_id = $2', [actor.member.accountId, actor.user.id]);
    if (still.rows.length === 0) {
      await this.opts.accounts.revokeKey(actor.member.accountId, created.record.id);
      throw new DashboardError(403, 'You are no longer a member of this account; the key was not made.');
    }
    return { key: await this.view(created.record, new Map([[actor.user.id, actor.user.email]]), await this.opts.teams.names(actor.member.accountId)), secret: created.secret };
  }

  /** Puts a key the actor manages in a team, or in none: owners and admins any team, a member one they are in. */
  async setTeam(actor: Actor, keyId: string, teamId: string | null): Promise<KeyView> {
    const k = await this.getKey(actor, keyId);
    await this.opts.teams.checkKeyTeam(actor, k.owner?.id, teamId);
    await this.opts.teams.setKeyTeam(actor, keyId, teamId);
    return this.getKey(actor, keyId);
  }

  /** Changes only the caps, cost ceiling and rate limits `change` names (null clears one); the rest stay as they are. */
  async updateKey(actor: Actor, keyId: string, change: KeyChange): Promise<KeyView> {
    await this.getKey(actor, keyId);
    if (!(await this.opts.accounts.updateKey(actor.member.accountId, keyId, change))) throw new DashboardError(404, NO_SUCH_KEY);
    return this.getKey(actor, keyId);
  }

  async revokeKey(actor: Actor, keyId: string): Promise<KeyView> {
    await this.getKey(actor, keyId);
    await this.opts.accounts.revokeKey(actor.member.accountId, keyId);
    return this.getKey(actor, keyId);
  }

  /** The account's default rate limits for keys that set none of their own. */
  async accountRateLimits(actor: Actor): Promise<RateLimits> {
    return (await this.opts.accounts.getAccount(actor.member.accountId))?.rateLimits ?? {};
  }

  async setAccountRateLimits(actor: Actor, limits: RateLimits): Promise<RateLimits> {
    requirePermission(actor, 'keys.defaults');
    await this.opts.accounts.setAccountRateLimits(actor.member.accountId, limits);
    return this.accountRateLimits(actor);
  }

  /** Revokes every active key a member made in the account (they left it); how many. Their usage stays on record. */
  async revokeKeysOf(accountId: string, userId: string): Promise<number> {
    const mine = (await this.opts.accounts.listKeys(accountId)).filter((k) => k.ownerId === userId && k.revokedAt === undefined);
    for (const k of mine) await this.opts.accounts.revokeKey(accountId, k.id);
    return mine.length;
  }

  /** Revokes every active key of the account (the organization is deleted); how many. */
  async revokeAll(accountId: string): Promise<number> {
    const live = (await this.opts.accounts.listKeys(accountId)).filter((k) => k.revokedAt === undefined);
    for (const k of live) await this.opts.accounts.revokeKey(accountId, k.id);
    return live.length;
  }
}
