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
  AccountRebuildingError,
  hasHotPathMovements,
  isSeededLedger,
  type HotPathMovements,
  type Ledger,
  type Micros,
  type RefundOutcome,
  type ReservationOutcome,
  type ReservationRequest,
  type SeededLedger,
  type SettlementOutcome,
  type SettlementRequest,
} from '../billing/ledger.js';
import { GatewayError } from '../http/gateway-error.js';
import { loadAccountSeed } from './account-seed.js';
import type { Database } from './database.js';
import { hotMovementOf, markApplied, recordMovement, type MoneyMovement, type MovementKind, type RecordedMovement } from './money-movement.js';
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

/** Attempts of one reservation through seeding and the rebuild window. */
const RESERVE_ATTEMPTS = 4;
/** Longest one wait for a rebuild window. */
const MAX_REBUILD_WAIT_MS = 5_000;

/** Still rebuilding after every attempt: a retryable 503, nothing sent upstream, nothing charged. */
function accountRebuilding(): GatewayError {
  return new GatewayError(
    503,
    "The account's balance is being restored from the record after a ledger restart, so the request was not sent and nothing was charged; retry in a few seconds.",
    { code: 'ledger_unavailable', retryAfterSeconds: 2 },
  );
}

/**
 * The settlement with its hold's generation and amount, as one literal of fixed shape: a spread of the
 * request followed by two more members cost ~1.7 µs per request, measured in isolation (V8's slow path
 * for a spread with additions).
 */
function settlementWithHold(req: SettlementRequest, hold: { generation: string; amount: Micros }): SettlementRequest {
  return {
    requestId: req.requestId,
    accountId: req.accountId,
    keyId: req.keyId,
    model: req.model,
    usage: req.usage,
    status: req.status,
    latencyMs: req.latencyMs,
    cost: req.cost,
    now: req.now,
    generation: hold.generation,
    reserved: hold.amount,
  };
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
  /**
   * Admitted holds' generation and amount, until settled: what a settlement of a hold lost with a wiped
   * Redis needs. Kept here, not by the caller, so a repeat of a settlement this process already applied
   * names no hold and stays a no-op after a wipe took its settled marker (the journal has the first).
   */
  private readonly holds = new Map<string, { generation: string; amount: Micros }>();
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
    this.seeded?.requireSeeding();
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
   * first). `windowMs` 0 is for an account created just now, which nothing can have settled yet.
   */
  seed(accountId: string, windowMs = this.windowMs): Promise<void> {
    const target = this.seeded;
    if (target === undefined) return Promise.resolve();
    let running = this.seeding.get(accountId);
    if (running === undefined) {
      running = (async () => {
        await this.restoreKeys?.(accountId);
        const seed = await loadAccountSeed(this.db, accountId, { windowMs, now: this.now() });
        await target.seedAccount(seed);
      })().finally(() => this.seeding.delete(accountId));
      this.seeding.set(accountId, running);
    }
    return running;
  }

  // The common case is one call to the hot path and one `then`: no async frame of its own, so the request
  // path pays for none (each async layer allocated ~0.4 KB per call, which the gateway paid for in
  // scavenges).
  override reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    return this.inner.reserve(req).then(
      (outcome) => this.admitted(req, outcome),
      (err: unknown) => this.reserveAgain(req, err),
    );
  }

  private admitted(req: ReservationRequest, outcome: ReservationOutcome): ReservationOutcome {
    if (outcome.admitted && outcome.generation !== undefined) this.holds.set(req.requestId, { generation: outcome.generation, amount: req.amount });
    return outcome;
  }

  /** A reservation the hot path would not take yet: the account is seeded, or its rebuild waited out, and it is tried again. */
  private async reserveAgain(req: ReservationRequest, err: unknown): Promise<ReservationOutcome> {
    for (let attempt = 1; ; attempt++) {
      if (attempt >= RESERVE_ATTEMPTS) throw err instanceof AccountRebuildingError || err instanceof AccountNotSeededError ? accountRebuilding() : err;
      if (err instanceof AccountNotSeededError) await this.seed(req.accountId);
      else if (err instanceof AccountRebuildingError) await sleep(Math.min(MAX_REBUILD_WAIT_MS, Math.max(10, err.retryAfterMs)));
      else throw err;
      try {
        return this.admitted(req, await this.inner.reserve(req));
      } catch (next) {
        err = next;
      }
    }
  }

  override settle(req: SettlementRequest): Promise<SettlementOutcome> {
    const hold = this.holds.get(req.requestId);
    const withHold = hold === undefined ? req : settlementWithHold(req, hold);
    return this.inner.settle(withHold).then(
      (outcome) => this.settled(req, outcome),
      async (err: unknown) => {
        if (!(err instanceof AccountNotSeededError)) throw err;
        await this.seed(req.accountId);
        return this.settled(req, await this.inner.settle(withHold));
      },
    );
  }

  private settled(req: SettlementRequest, outcome: SettlementOutcome): SettlementOutcome {
    this.holds.delete(req.requestId);
    return outcome;
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
      return true;
    } catch (err) {
      this.onHotPathPending?.(err, m);
      return false;
    }
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
