// The one place an account or a key changes, under the admin API and the dashboard (its holder pages,
// its admin pages and its refund tickets): create an account, create a key, credit, set or clear caps,
// revoke, refund. Money crosses it in micro-USD only; an app that speaks cents or USD text converts at
// its own edge. A revoke always tells the key cache, so no caller can forget to.
import type { Micros } from '../catalog/snapshot.js';
import { CreditConflictError } from '../billing/ledger-common.js';
import type { AccountBalance, Ledger, RefundOutcome } from '../billing/ledger.js';
import { MovementConflict } from '../record/money-movement.js';
import type { Account, AccountStore, ApiKeyRecord, CreatedKey, KeyCaps, NewKeyOptions } from './account-store.js';
import type { RateLimits } from './rate-limits.js';

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
}

export class AccountService {
  constructor(private readonly opts: AccountServiceOptions) {}

  get store(): AccountStore {
    return this.opts.accounts;
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

  /** Sets the caps given and clears the others; false when the account has no such key. */
  setCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    return this.opts.accounts.setKeyCaps(accountId, keyId, caps);
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

  /** Gives back what a settled request cost, once (the ledger's refund is idempotent). */
  refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    return this.opts.ledger.refund(accountId, requestId);
  }
}
