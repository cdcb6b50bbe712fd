// The dashboard's parts, built once from one set of options over the one AccountService the composition
// root made: identity (sign-up, sign-in, confirmation, reset), sessions, two-factor settings, the
// operator's provisioning, keys, organizations with their members, and invitations. Pages and the JSON
// API both call these parts, so a rule (membership, ownership, caps, secrets shown once) is written once.
import type { AccountService } from '../account-service/account-service.js';
import type { Database } from '../record/database.js';
import { statementPage, type StatementPage } from '../record/statement.js';
import { UsageQueryError } from '../record/usage-query.js';
import type { Actor } from './actor.js';
import { DashboardError } from './errors.js';
import { Identity } from './identity.js';
import { Invitations } from './invitations.js';
import { KeyService } from './keys.js';
import { Organizations } from './organizations.js';
import { Provisioning } from './provisioning.js';
import { Sessions } from './sessions.js';
import type { SignInEvents } from './sign-in-events.js';
import { SingleSignOn } from './sso.js';
import type { SsoConfig } from './sso-config.js';
import { TeamsService } from './teams.js';
import type { Throttles } from './throttle.js';
import { TwoFactorSettings } from './two-factor-settings.js';

export interface DashboardServiceOptions {
  db: Database;
  /** The one account service of the process (built in the composition root): a revoke there tells the key cache. */
  accounts: AccountService;
  signUp: boolean;
  sessionTtlMs: number;
  /** Attempt budgets of sign-in, sign-up and password reset (defaults: throttle.ts). */
  throttles?: Partial<Throttles>;
  /** Admin pages and the admin API need a session opened with TOTP (DASHBOARD_ADMIN_REQUIRE_TOTP). */
  adminRequiresTotp?: boolean;
  /** Structured log lines of what must be on record (an admin clearing a user's two-factor sign-in); default stderr. */
  log?: (line: string) => void;
  /** Single sign-on through the company's OpenID provider (sso-config.ts); absent: passwords only. */
  sso?: { config: SsoConfig; secureCookie: boolean };
  /** Where every sign-in's outcome goes, password or SSO (the audit log's hook); default: nowhere. */
  signInEvents?: SignInEvents;
}

export class DashboardService {
  readonly db: Database;
  readonly accounts: AccountService;
  readonly sessions: Sessions;
  readonly identity: Identity;
  readonly twoFactor: TwoFactorSettings;
  readonly provisioning: Provisioning;
  readonly keys: KeyService;
  readonly organizations: Organizations;
  readonly invitations: Invitations;
  readonly teams: TeamsService;
  /** Absent when SSO is not configured. */
  readonly sso?: SingleSignOn;

  constructor(private readonly opts: DashboardServiceOptions) {
    const { db, accounts } = opts;
    this.db = db;
    this.accounts = accounts;
    this.sessions = new Sessions({ db, ttlMs: opts.sessionTtlMs });
    const events: SignInEvents = opts.signInEvents ?? (() => undefined);
    this.identity = new Identity({
      db,
      accounts,
      signUp: opts.signUp,
      sessions: this.sessions,
      events,
      passwordRefusal: (email) => this.sso?.passwordRefusal(email),
      ...(opts.throttles === undefined ? {} : { throttles: opts.throttles }),
    });
    this.twoFactor = new TwoFactorSettings({ db, identity: this.identity, ...(opts.log === undefined ? {} : { log: opts.log }) });
    this.provisioning = new Provisioning({ db, accounts });
    this.teams = new TeamsService({ db, accounts });
    this.keys = new KeyService({ db, accounts, teams: this.teams });
    this.organizations = new Organizations({ db, accounts, keys: this.keys });
    this.invitations = new Invitations({ db });
    if (opts.sso !== undefined) this.sso = new SingleSignOn({ db, accounts, keys: this.keys, sessions: this.sessions, config: opts.sso.config, secureCookie: opts.sso.secureCookie, events });
  }

  get adminRequiresTotp(): boolean {
    return this.opts.adminRequiresTotp === true;
  }

  /** What the actor's account can spend now (the hot path), and what requests in flight hold of it. */
  balance(actor: Actor): Promise<{ balance: number; held: number }> {
    return this.accounts.balance(actor.member.accountId);
  }

  /** One page of the account's statement of record, newest entry first. */
  async statement(actor: Actor, cursor: unknown, limit = 50): Promise<StatementPage> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new DashboardError(400, 'cursor must be the next_cursor of a previous page.');
    try {
      return await statementPage(this.db, { accountId: actor.member.accountId, limit, ...(cursor === undefined || cursor === '' ? {} : { cursor }) });
    } catch (err) {
      if (err instanceof UsageQueryError) throw new DashboardError(400, err.message);
      throw err;
    }
  }
}
