// The ledger with PostgreSQL as the record of money. A credit commits its ledger entry there first (once
// per idempotency key), then the hot path applies it under the same key, so a credit Redis never saw is
// still on the record and a repeat never counts twice.
// Over a Redis hot path the record is also where money comes back from: an account whose copy Redis
// lost (a wipe, a failover to an empty replica, a new cluster) is refused by the scripts until it is
// seeded from the record (account-seed.ts), and then used as before. Settlements of holds the wipe took
// are charged (the seed never counted them), and those another gateway applied before the wipe but had
// not committed are added when they commit (catch-up.lua).
import { DelegatingLedger } from '../billing/delegating-ledger.js';
import {
  AccountNotSeededError,
  type AccountRebuildingError,
  hasHotPathMovements,
  isSeededLedger,
  type HotPathMovements,
  type Ledger,
  type Micros,
  type RefundOutcome,
  type SeededLedger,
} from '../billing/ledger.js';
import { LedgerUnavailableError } from '../billing/ledger-health.js';
import { loadAccountSeed } from './account-seed.js';
import type { Database } from './database.js';
import { hotMovementOf, markApplied, recordHotSeq, recordMovement, type MoneyMovement, type MovementKind, type RecordedMovement } from './money-movement.js';
import { startMovementSweeper, type MovementSweeper } from './movement-sweeper.js';

export interface RecordedLedgerOptions {
  kind?: MovementKind;
  /**
   * How long an account seeded after a wipe refuses new holds: long enough for every gateway to commit
   * the settlements it applied before the wipe (the journal writer's commit pause and the catch-up's
   * period), so no cap is passed on figures that miss them.
   */
  rebuildWindowMs?: number;
  now?: () => number;
  /**
   * Puts the account's keys back before its money is loaded: a gateway that authenticated a key from
   * its cache must find the key's record in the hot path, not an unknown key.
   */
  restoreKeys?: (accountId: string) => Promise<void>;
  /**
   * How often movements the record committed but the hot path never took (Redis down after the commit)
   * are applied again; 0 turns the sweeper off. Only a Redis hot path gets one: the memory hot path is
   * in this process, and after a restart it is rebuilt from the record's totals, which count them.
   */
  movementSweepMs?: number;
  /** A movement younger than this is left to the call that committed it (default 2 s). */
  movementSweepGraceMs?: number;
  /** A committed movement's hot-path step failed; the sweeper retries it. */
  onHotPathPending?: (err: unknown, m: MoneyMovement) => void;
}

/** Attempts of one reservation or settlement through seeding and the rebuild window. */
const LOAD_ATTEMPTS = 4;
/**
 * Reads of the record one reload takes at most: a read is taken again only when something the record
 * committed after it reached the account while it was on its way to Redis (a journal's commit, a
 * movement), which a read of a few milliseconds meets rarely, and twice in a row more rarely still.
 */
const SEED_READS = 5;
/** Longest one wait for a rebuild window. */
const MAX_REBUILD_WAIT_MS = 5_000;

/** Still rebuilding after every attempt: the ledger is unavailable for this account (retryable, nothing sent upstream, nothing charged). */
function accountRebuilding(): LedgerUnavailableError {
  return new LedgerUnavailableError(
    "The account's balance is being restored from the record after a ledger restart, so the request was not sent and nothing was charged; retry in a few seconds.",
    2,
  );
}

/** A hot path that keeps a seq per account (the Redis ledger) and can mark a copy behind it as unloaded. */
interface StaleMarking {
  markStaleIfBehind(accountId: string, recordSeq: number): Promise<{ marked: boolean; seq: number }>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class RecordedLedger extends DelegatingLedger {
  private readonly kind: MovementKind;
  private readonly seeded: SeededLedger | undefined;
  private readonly windowMs: number;
  private readonly now: () => number;
  private readonly restoreKeys: ((accountId: string) => Promise<void>) | undefined;
  /** One seed at a time per account in this process. */
  private readonly seeding = new Map<string, Promise<void>>();
  private readonly hot: HotPathMovements | undefined;
  private readonly sweeper: MovementSweeper | undefined;
  private readonly onHotPathPending: ((err: unknown, m: MoneyMovement) => void) | undefined;

  constructor(
    inner: Ledger,
    private readonly db: Database,
    opts: RecordedLedgerOptions = {},
  ) {
    super(inner);
    this.kind = opts.kind ?? 'admin_credit';
    this.windowMs = opts.rebuildWindowMs ?? 2_000;
    this.now = opts.now ?? Date.now;
    this.restoreKeys = opts.restoreKeys;
    this.seeded = isSeededLedger(inner) ? inner : undefined;
    // The hot path asks this ledger to load an account it refused, and tries the call again itself: the
    // request path pays for no layer of this one (each cost ~0.4 KB of garbage per call, paid for in
    // scavenges).
    this.seeded?.requireSeeding({ ready: (err, attempt) => this.ready(err, attempt) });
    this.hot = hasHotPathMovements(inner) ? inner : undefined;
    this.onHotPathPending = opts.onHotPathPending;
    const sweepMs = opts.movementSweepMs ?? 5_000;
    if (this.seeded !== undefined && sweepMs > 0) {
      this.sweeper = startMovementSweeper({
        db,
        intervalMs: sweepMs,
        ...(opts.movementSweepGraceMs === undefined ? {} : { graceMs: opts.movementSweepGraceMs }),
        apply: (m, r) => this.applyCommitted(m, r),
      });
    }
  }

  /**
   * Loads the account's money from the record into the hot path (a no-op when another gateway did it
   * first). `windowMs` 0 is for an account created just now, which nothing can have settled yet. The
   * read is taken under a reload mark: a commit that reaches the account between the read and the load
   * (another gateway's journal committing what the lost copy settled, a movement) is told to the mark,
   * and a read that missed it is taken again rather than loaded without it.
   */
  seed(accountId: string, windowMs = this.windowMs): Promise<void> {
    const target = this.seeded;
    if (target === undefined) return Promise.resolve();
    let running = this.seeding.get(accountId);
    if (running === undefined) {
      running = (async () => {
        await this.restoreKeys?.(accountId);
        for (let read = 1; ; read++) {
          const reload = await target.beginSeed(accountId);
          if (reload === undefined) return;
          const seed = await loadAccountSeed(this.db, accountId, { windowMs, now: this.now(), reload });
          if ((await target.seedAccount(seed)) !== 'read again') return;
          if (read >= SEED_READS) throw accountRebuilding();
        }
      })().finally(() => this.seeding.delete(accountId));
      this.seeding.set(accountId, running);
    }
    return running;
  }

  /**
   * An account the hot path refused (not loaded, or in its rebuild window) is seeded, or its window
   * waited out, before the hot path tries again; past the attempts, a retryable 503.
   */
  private async ready(err: AccountNotSeededError | AccountRebuildingError, attempt: number): Promise<void> {
    if (attempt >= LOAD_ATTEMPTS) throw accountRebuilding();
    if (err instanceof AccountNotSeededError) await this.seed(err.accountId);
    else await sleep(Math.min(MAX_REBUILD_WAIT_MS, Math.max(10, err.retryAfterMs)));
  }

  override async credit(accountId: string, amount: Micros, idempotencyKey: string): Promise<boolean> {
    if (!Number.isSafeInteger(amount) || amount <= 0) return this.inner.credit(accountId, amount, idempotencyKey);
    const movement: MoneyMovement = { accountId, kind: this.kind, amount, idempotencyKey };
    const recorded = await this.db.transaction((tx) => recordMovement(tx, movement));
    if (this.hot === undefined) {
      // Committed: the hot path's own idempotency key makes a repeat (or a retry after a crash here) a no-op.
      return this.inner.credit(accountId, amount, idempotencyKey);
    }
    await this.applyCommitted(movement, recorded);
    return !recorded.duplicate;
  }

  /**
   * Refunds one request's charge of record: the usage record (found on this account only) is marked
   * refunded and its `refund:<requestId>` ledger entry written in one transaction, then the hot path
   * takes the credit. A request another account made is unknown here, as is one not journaled yet.
   */
  override async refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    if (this.hot === undefined) return this.inner.refund(accountId, requestId);
    const done = await this.db.transaction(async (tx) => {
      const found = await tx.query<{ cost: number; refunded: boolean }>(
        'SELECT cost, refunded_at IS NOT NULL AS refunded FROM usage_records WHERE request_id = $1 AND account_id = $2 FOR UPDATE',
        [requestId, accountId],
      );
      const row = found.rows[0];
      if (row === undefined) return { outcome: { refunded: 0, unknown: true, duplicate: false } };
      if (row.refunded) return { outcome: { refunded: 0, unknown: false, duplicate: true } };
      await tx.query('UPDATE usage_records SET refunded_at = now() WHERE request_id = $1', [requestId]);
      if (row.cost === 0) return { outcome: { refunded: 0, unknown: false, duplicate: false } };
      const movement: MoneyMovement = { accountId, kind: 'refund', amount: row.cost, idempotencyKey: `refund:${requestId}`, requestId };
      return { outcome: { refunded: row.cost, unknown: false, duplicate: false }, movement, recorded: await recordMovement(tx, movement) };
    });
    if (done.movement !== undefined) await this.applyCommitted(done.movement, done.recorded);
    return done.outcome;
  }

  /**
   * The hot path's half of a movement the record committed: applied once (the hot path's marker per
   * idempotency key), then marked applied in the record. True when the hot path has it now. When the
   * hot path cannot be reached the movement stays pending and the sweeper applies it later; a repeat of
   * a movement already applied is not sent again (a memory hot path rebuilt from the record has it).
   */
  async applyCommitted(m: MoneyMovement, recorded: RecordedMovement): Promise<boolean> {
    const hot = this.hot;
    if (hot === undefined || (recorded.duplicate && recorded.applied)) return true;
    try {
      try {
        await hot.applyMovement(hotMovementOf(m, recorded.recordTx));
      } catch (err) {
        // Not loaded: the seed reads the record, which has this movement now.
        if (!(err instanceof AccountNotSeededError)) throw err;
        await this.seed(m.accountId);
      }
      await markApplied(this.db, recorded.entryId);
      // The seq Redis reached with it: a Redis that later comes back below it lost the movement.
      const seen = (this.inner as Partial<{ seenSeq(accountId: string): number }>).seenSeq?.(m.accountId) ?? 0;
      await recordHotSeq(this.db, m.accountId, seen);
      return true;
    } catch (err) {
      this.onHotPathPending?.(err, m);
      return false;
    }
  }

  /**
   * Reconciliation's repair of a partial loss: when the hot path's copy of the account is at a lower seq
   * than the record has seen (Redis lost writes the record has), the account is loaded again from the
   * record, as after a wipe. Returns the two seqs when it was behind; undefined when not (or when the hot
   * path keeps no seq).
   */
  async repairIfBehind(accountId: string): Promise<{ hot: number; record: number } | undefined> {
    const hot = this.inner as Partial<StaleMarking>;
    if (typeof hot.markStaleIfBehind !== 'function') return undefined;
    const r = await this.db.query<{ seq: number }>('SELECT seq FROM account_hot_seq WHERE account_id = $1', [accountId]);
    const record = Number(r.rows[0]?.seq ?? 0);
    if (record === 0) return undefined;
    const marked = await hot.markStaleIfBehind(accountId, record);
    if (!marked.marked) return undefined;
    await this.seed(accountId);
    return { hot: marked.seq, record };
  }

  /** One sweep of pending movements now (the timer runs them too); how many the hot path took. */
  sweepMovements(): Promise<number> {
    return this.sweeper?.sweep() ?? Promise.resolve(0);
  }

  override async close(): Promise<void> {
    this.sweeper?.stop();
    await super.close();
  }
}
