// The one place an account or a key changes, under the admin API, the dashboard (its holder pages,
// its admin pages and its refund tickets) and payments: create an account, create a key, credit, set or
// clear caps, revoke, refund, and the money a payment moves (a top-up's credit, a refund's reversal, a
// dispute's hold and release). Money crosses it in micro-USD only; an app that speaks cents or USD text
// converts at its own edge. A revoke always tells the key cache, so no caller can forget to.
import type { Micros } from '../catalog/snapshot.js';
import { CreditConflictError } from '../billing/ledger-common.js';
import type { AccountBalance, BudgetScope, KeySpend, Ledger, RefundOutcome } from '../billing/ledger.js';
import type { Queryable } from '../record/database.js';
import { MovementConflict, recordMovement, type MoneyMovement, type RecordedMovement } from '../record/money-movement.js';
import type { Account, AccountStore, ApiKeyRecord, CreatedKey, KeyCaps, KeyChange, NewKeyOptions } from '../accounts/account-store.js';
import { RATE_LIMIT_FIELDS, type RateLimitField, type RateLimits } from '../accounts/rate-limits.js';
import { hasTeams, type TeamStore } from '../accounts/teams.js';

/** Why a credit was refused; each app words it for its own reader. */
export type CreditRefusal = 'not_positive' | 'no_idempotency_key' | 'too_large' | 'key_reused';

export class CreditRefused extends Error {
  constructor(readonly reason: CreditRefusal) {
    super(`credit refused: ${reason}`);
  }
}

/** An idempotency key names one credit; longer ones are refused rather than cut (two could collide). */
const MAX_IDEMPOTENCY_KEY = 200;

export interface AccountServiceOptions {
  accounts: AccountStore;
  ledger: Ledger;
  /** Called after a key is revoked, so an in-process gateway forgets its cached lookups at once. */
  onRevoke?: () => void;
  /**
   * The hot path's half of a movement a record transaction committed (RecordedLedger.applyCommitted):
   * needed for payments' movements, which commit with the payment's own state.
   */
  applyCommitted?: (m: MoneyMovement, recorded: RecordedMovement) => Promise<boolean>;
}

/** Money a payment moves: a top-up's credit, a refund's reversal (or its return), a dispute's hold and release. */
export interface PaymentMovement {
  accountId: string;
  kind: 'top_up' | 'reversal' | 'dispute_hold' | 'dispute_release';
  /** Micro-USD, more than zero: a credit adds it, a debit takes it. */
  amount: Micros;
  /** Unique across the ledger: a repeat is a no-op. */
  idempotencyKey: string;
  /** The top-up it is about. */
  reference: string;
  memo: string;
}

/** A movement written in a record transaction, for the hot path once that transaction commits. */
export interface CommittedMovement {
  movement: MoneyMovement;
  recorded: RecordedMovement;
}

export class AccountService {
  constructor(private readonly opts: AccountServiceOptions) {}

  get store(): AccountStore {
    return this.opts.accounts;
  }

  /** Teams and budgets: kept by the record, so absent when accounts have none. */
  get teams(): TeamStore | undefined {
    return hasTeams(this.opts.accounts) ? this.opts.accounts.teams : undefined;
  }

  createAccount(name: string): Promise<Account> {
    return this.opts.accounts.createAccount(name);
  }

  getAccount(accountId: string): Promise<Account | undefined> {
    return this.opts.accounts.getAccount(accountId);
  }

  listAccounts(): Promise<Account[]> {
    return this.opts.accounts.listAccounts();
  }

  balance(accountId: string): Promise<AccountBalance> {
    return this.opts.ledger.balance(accountId);
  }

  createKey(accountId: string, opts: NewKeyOptions): Promise<CreatedKey> {
    return this.opts.accounts.createKey(accountId, opts);
  }

  getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.opts.accounts.getKey(accountId, keyId);
  }

  listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    return this.opts.accounts.listKeys(accountId);
  }

  /** What a key has spent (this month, over its life) and what its requests in flight hold. */
  keySpend(accountId: string, keyId: string): Promise<KeySpend> {
    return this.opts.ledger.keySpend(accountId, keyId);
  }

  /** What a team or a member has spent (this month, over its life) and what requests in flight hold of it. */
  scopeSpend(accountId: string, scope: BudgetScope, id: string): Promise<KeySpend> {
    return this.opts.ledger.scopeSpend(accountId, scope, id);
  }

  /** Sets the caps given and clears the others; false when the account has no such key. */
  setCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    return this.opts.accounts.setKeyCaps(accountId, keyId, caps);
  }

  /** Changes only the caps, cost ceiling and rate limits `change` names (null clears one); false when the account has no such key. */
  updateKey(accountId: string, keyId: string, change: KeyChange): Promise<boolean> {
    return this.opts.accounts.updateKey(accountId, keyId, change);
  }

  /**
   * Changes only the account's default rate limits `change` names (null clears one); false when no such
   * account. Read, merged and written whole: of two changes at once to different limits, the last wins.
   */
  async updateAccountRateLimits(accountId: string, change: Partial<Record<RateLimitField, number | null>>): Promise<boolean> {
    const account = await this.opts.accounts.getAccount(accountId);
    if (account === undefined) return false;
    const limits: RateLimits = { ...account.rateLimits };
    for (const f of RATE_LIMIT_FIELDS) {
      const v = change[f];
      if (v === null) delete limits[f];
      else if (v !== undefined) limits[f] = v;
    }
    return this.opts.accounts.setAccountRateLimits(accountId, limits);
  }

  /** Sets the key's own rate limits given and clears the others; false when the account has no such key. */
  setKeyRateLimits(accountId: string, keyId: string, limits: RateLimits): Promise<boolean> {
    return this.opts.accounts.setKeyRateLimits(accountId, keyId, limits);
  }

  /** Sets the account's default rate limits for its keys (a key's own value overrides); false when no such account. */
  setAccountRateLimits(accountId: string, limits: RateLimits): Promise<boolean> {
    return this.opts.accounts.setAccountRateLimits(accountId, limits);
  }

  /** Revokes the key and tells the key cache; false when the account has no such key. */
  async revokeKey(accountId: string, keyId: string): Promise<boolean> {
    const revoked = await this.opts.accounts.revokeKey(accountId, keyId);
    if (revoked) this.opts.onRevoke?.();
    return revoked;
  }

  /**
   * Credits `amount` once per idempotency key: true when applied now, false when this key was applied
   * before with the same amount. Throws CreditRefused for a bad amount or key, or a key reused for
   * another amount (nothing is credited then).
   */
  async credit(accountId: string, amount: Micros, idempotencyKey: unknown): Promise<boolean> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new CreditRefused('not_positive');
    if (typeof idempotencyKey !== 'string' || idempotencyKey === '' || idempotencyKey.length > MAX_IDEMPOTENCY_KEY) {
      throw new CreditRefused('no_idempotency_key');
    }
    try {
      return await this.opts.ledger.credit(accountId, amount, idempotencyKey);
    } catch (err) {
      if (err instanceof RangeError) throw new CreditRefused('too_large');
      if (err instanceof CreditConflictError || err instanceof MovementConflict) throw new CreditRefused('key_reused');
      throw err;
    }
  }

  /** Whether payments can move money through this service (it was given the record's hot-path step). */
  get movesPayments(): boolean {
    return this.opts.applyCommitted !== undefined;
  }

  /**
   * Credits a payment's money in `tx` (the payment's own record transaction), once per idempotency key:
   * the movement to hand to applyCommitted after COMMIT, or undefined when the key was used before.
   */
  creditWithin(tx: Queryable, m: PaymentMovement): Promise<CommittedMovement | undefined> {
    return this.moveWithin(tx, m, m.amount);
  }

  /** Takes a payment's money back in `tx`, as creditWithin adds it (a reversal, a dispute's hold). */
  debitWithin(tx: Queryable, m: PaymentMovement): Promise<CommittedMovement | undefined> {
    return this.moveWithin(tx, m, -m.amount);
  }

  private async moveWithin(tx: Queryable, m: PaymentMovement, signed: Micros): Promise<CommittedMovement | undefined> {
    if (!(m.amount > 0)) throw new RangeError('a payment movement is a positive number of micro-USD');
    const movement: MoneyMovement = { accountId: m.accountId, kind: m.kind, amount: signed, idempotencyKey: m.idempotencyKey, reference: m.reference, memo: m.memo };
    const recorded = await recordMovement(tx, movement);
    return recorded.duplicate ? undefined : { movement, recorded };
  }

  /**
   * The hot path takes a committed movement: true when it has it now. Left pending (false, or the hot
   * path's error), the movement sweeper applies it later.
   */
  applyCommitted(done: CommittedMovement): Promise<boolean> {
    const apply = this.opts.applyCommitted;
    if (apply === undefined) return Promise.reject(new Error('this account service was built without the record\'s hot-path step (applyCommitted)'));
    return apply(done.movement, done.recorded);
  }

  /** Gives back what a settled request cost, once (the ledger's refund is idempotent). */
  refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    return this.opts.ledger.refund(accountId, requestId);
  }
}
