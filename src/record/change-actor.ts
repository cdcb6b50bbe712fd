// Who is making the changes the current request or command makes: the audit log's "who" and "from
// where". Set once at the edge (the dashboard's and the admin API's middleware, the CLI's start) and read
// by the database handle, which hands it to PostgreSQL as the transaction-local setting `tollgate.actor`;
// the audit triggers read it there. Carried by AsyncLocalStorage so that no store or service needs a new
// parameter to pass it down.
import { AsyncLocalStorage } from 'node:async_hooks';

export type ChangeActorKind = 'user' | 'sso' | 'admin_token' | 'cli' | 'system';

export interface ChangeActor {
  kind: ChangeActorKind;
  /** A dashboard user's id, an admin token's name, an SSO subject, the CLI's operator; none for the system. */
  id?: string;
  /** What a person reading the log recognises: an e-mail address, "admin API". */
  label?: string;
  address?: string;
  userAgent?: string;
  requestId?: string;
}

const current = new AsyncLocalStorage<ChangeActor>();

/** Runs `fn` with `actor` as the author of every change it makes. */
export function asActor<T>(actor: ChangeActor, fn: () => T): T {
  return current.run(actor, fn);
}

export function currentActor(): ChangeActor | undefined {
  return current.getStore();
}

// A user agent is the client's to choose; the log keeps enough to recognise one.
const USER_AGENT_MAX = 300;

/** The setting's value: JSON, what the triggers read. */
export function actorSetting(actor: ChangeActor): string {
  return JSON.stringify({ ...actor, ...(actor.userAgent === undefined ? {} : { userAgent: actor.userAgent.slice(0, USER_AGENT_MAX) }) });
}

/** A statement that may write: an autocommit one with an actor runs in a transaction that names it. */
export function mayWrite(sql: string): boolean {
  return /\b(insert|update|delete|merge)\b/i.test(sql);
}
