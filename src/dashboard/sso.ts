// Single sign-on through the company's OpenID provider, end to end: start (the browser goes to the
// provider with a state bound to it), finish (the callback: the state taken once, the code exchanged,
// the ID token verified, the person admitted by the mapping, a session of the SSO life opened), and
// the rule that addresses of the provider's domains sign in only through it when the operator says so.
// Every outcome is a sign-in event (sign-in-events.ts).
import type { Context } from 'koa';
import type { AccountService } from '../account-service/account-service.js';
import { asActor, currentActor } from '../record/change-actor.js';
import type { Database } from '../record/database.js';
import type { KeyService } from './keys.js';
import type { Session, Sessions } from './sessions.js';
import { recordSignIn, type SignInEvents } from './sign-in-events.js';
import { domainOf, type SsoConfig } from './sso-config.js';
import { SsoLogins } from './sso-logins.js';
import { SsoMembership } from './sso-membership.js';
import { SsoProvider, SsoRefusal } from './sso-provider.js';

export const SSO_START_PATH = '/sso/start';

export interface SingleSignOnOptions {
  db: Database;
  accounts: AccountService;
  keys: KeyService;
  sessions: Sessions;
  config: SsoConfig;
  secureCookie: boolean;
  events: SignInEvents;
}

export class SingleSignOn {
  readonly provider: SsoProvider;
  private readonly logins: SsoLogins;
  private readonly membership: SsoMembership;

  constructor(private readonly opts: SingleSignOnOptions) {
    this.provider = new SsoProvider(opts.config);
    this.logins = new SsoLogins({ db: opts.db, secureCookie: opts.secureCookie });
    this.membership = new SsoMembership({ db: opts.db, accounts: opts.accounts, keys: opts.keys, config: opts.config });
  }

  /** What the sign-in page shows. */
  get button(): { name: string; href: string } {
    return { name: this.opts.config.name, href: SSO_START_PATH };
  }

  /** Why a password may not be used for this address (SSO only for its domain), or undefined when it may. */
  passwordRefusal(email: string): string | undefined {
    const { config } = this.opts;
    if (!config.ssoOnly || !config.domains.includes(domainOf(email))) return undefined;
    return `Addresses at ${domainOf(email)} sign in through ${config.name}, not with a password: use "Sign in with ${config.name}" on the sign-in page (${SSO_START_PATH}).`;
  }

  /** The provider's URL this browser goes to, the sign-in's checks kept for the callback. */
  async start(ctx: Context): Promise<URL> {
    const { url, checks } = await this.provider.begin();
    await this.logins.keep(ctx, checks);
    return url;
  }

  /** The callback: a session for the person the provider vouched for, or a refusal (recorded either way). */
  async finish(ctx: Context, previousSessionId: string | undefined): Promise<{ sessionId: string; session: Session }> {
    const where = { address: ctx.ip, ...(ctx.get('User-Agent') === '' ? {} : { userAgent: ctx.get('User-Agent') }) };
    let issuer = this.opts.config.issuer.href;
    let subject: string | undefined;
    let email: string | undefined;
    try {
      const query = new URLSearchParams(ctx.querystring);
      const checks = await this.logins.take(ctx, query.get('state') ?? undefined).finally(() => this.logins.forget(ctx));
      const claims = await this.provider.complete(query, checks);
      issuer = claims.issuer;
      subject = claims.subject;
      email = claims.email;
      // What the admission changes (the user, their memberships) is on record as the provider's subject's doing.
      const acting = currentActor();
      const { user, accountId } = await asActor({ ...(acting ?? {}), kind: 'sso', id: claims.subject, ...(claims.email === undefined ? {} : { label: claims.email }) }, () => this.membership.admit(claims));
      if (previousSessionId !== undefined) await this.opts.sessions.signOut(previousSessionId);
      const opened = await this.opts.sessions.open(user, false, { method: 'sso', ttlMs: this.opts.config.sessionTtlMs });
      await this.opts.sessions.choose(opened.sessionId, accountId);
      const session = (await this.opts.sessions.load(opened.sessionId)) ?? opened.session;
      // On record in the organization the provider admitted them to, so its owners read it there. No
      // sign-in goes unrecorded: when its entry cannot be written, the session just opened is ended.
      try {
        await recordSignIn(this.opts.db, { succeeded: true, method: 'sso', user: { id: user.id, email: user.email, accountId } });
      } catch (err) {
        await this.opts.sessions.signOut(opened.sessionId);
        throw err;
      }
      this.opts.events({ outcome: 'success', method: 'sso', email: user.email, userId: user.id, sso: { issuer: claims.issuer, subject: claims.subject }, ...where });
      return { sessionId: opened.sessionId, session };
    } catch (err) {
      const reason = err instanceof SsoRefusal ? err.message : err instanceof Error ? err.message : String(err);
      // The refusal's entry; when it cannot be written either, the log line says so (the refusal stands).
      const notRecorded = await recordSignIn(this.opts.db, { succeeded: false, method: 'sso', reason: 'sso_refused', why: reason }).then(
        () => undefined,
        (auditErr: unknown) => (auditErr instanceof Error ? auditErr.message : String(auditErr)),
      );
      this.opts.events({ outcome: 'failure', method: 'sso', ...(email === undefined ? {} : { email }), sso: { issuer, ...(subject === undefined ? {} : { subject }) }, ...where, reason, ...(notRecorded === undefined ? {} : { auditEntryNotWritten: notRecorded }) });
      throw err;
    }
  }
}
