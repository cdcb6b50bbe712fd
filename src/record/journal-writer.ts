// The journal writer: one per gateway. It holds the settlements this process applied until PostgreSQL
// has committed them, commits them in batches, and only then lets the hot path forget them (deletes the
// Redis stream copy). Two copies exist until COMMIT — the process's memory and the account's Redis
// stream (written by the settle script itself) — so a Redis wipe loses nothing a live gateway settled,
// and a dead gateway loses nothing Redis kept: the sweeper of any gateway commits a stream entry that
// outlived its owner. Every commit is idempotent, so overlapping writers only repeat work.
import { commitJournal, type JournalEntry } from './journal.js';
import type { Database } from './database.js';

/** The Redis side of the journal; the memory hot path has none. */
export interface JournalStream {
  /** Deletes entries PostgreSQL has committed. */
  remove(entries: readonly JournalEntry[]): Promise<void>;
  /** Entries of these accounts appended before `before` (unix ms) still in their streams, at most `limit`. */
  sweep(accountIds: readonly string[], before: number, limit: number): Promise<JournalEntry[]>;
}

export interface JournalLag {
  /** Entries not yet committed to PostgreSQL. */
  count: number;
  /** Age in ms of the oldest of them (0 when there are none). */
  oldestMs: number;
}

export interface JournalWriterOptions {
  db: Database;
  stream?: JournalStream;
  /** Past this lag the gateway refuses new requests (fails closed) until the writer catches up. */
  maxLagMs: number;
  /** Entries per transaction. */
  batchSize?: number;
  /** Pause between commits while entries wait; the first entry after a quiet spell waits at most this. */
  intervalMs?: number;
  /** How often the streams are swept for entries a dead gateway left; 0 turns the sweeper off. */
  sweepIntervalMs?: number;
  /** A stream entry younger than this is left to the gateway that wrote it. */
  sweepGraceMs?: number;
  /**
   * Committed entries are deleted from the Redis streams right after each commit, in one pass (one
   * catch-up script per account), so the deletions cost Redis a fraction of a command per request
   * instead of one each; passes that failed (Redis down) are tried again every this period. Passes are
   * a commit pause's worth: a second's worth of deletions in one pass held this gateway's Redis
   * connection (and every request's command behind it) for several milliseconds at a time, which cost
   * the bench ~5% of its throughput; passes a tenth the size cost it ~1%. Kept well under the sweep
   * grace, so a sweeper rarely meets a committed entry (and then commits a no-op).
   */
  trimIntervalMs?: number;
  /**
   * Whether each commit starts its trim pass at once (the default). False leaves trims to the period
   * and to calls of trim(): for tests that stage a wipe between a commit and its trim.
   */
  trimAfterCommit?: boolean;
  now?: () => number;
  /** After each commit: what it added, and whether the batch repeated a request and was merged. */
  onCommitted?: (records: number, charged: number, merged: boolean) => void;
  onError?: (err: unknown, stage: 'commit' | 'sweep' | 'trim') => void;
}

/** The default commit pause and trim period. */
export const JOURNAL_WRITER_PERIOD_MS = 100;
const MAX_BACKOFF_MS = 1_000;
/** Committed entries that trigger a trim before its period is up. */
const TRIM_BATCH = 5_000;
/** Committed entries kept for another trim pass when one fails (Redis down). */
const MAX_TRIM_BACKLOG = 200_000;
/** Accounts whose streams one sweep reads. */
const SWEEP_ACCOUNTS_PAGE = 1_000;

export class JournalWriter {
  /** By request id: a settlement seen twice (own copy and swept copy) is committed once. */
  private readonly pending = new Map<string, JournalEntry>();
  private oldest = Infinity;
  private timer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private trimTimer: NodeJS.Timeout | undefined;
  /** Committed entries whose Redis copies await deletion. */
  private committedInStream: JournalEntry[] = [];
  private flushing: Promise<void> | undefined;
  /** The trim pass running or last run: passes go one at a time, and trim() resolves after every earlier one. */
  private trimming: Promise<void> = Promise.resolve();
  private failures = 0;
  private stopped = false;
  /** The sweeper walks the accounts of record a page at a time, from after this id. */
  private sweepCursor = '';
  private readonly opts: Required<Omit<JournalWriterOptions, 'stream' | 'onCommitted' | 'onError'>> & JournalWriterOptions;

  constructor(opts: JournalWriterOptions) {
    this.opts = {
      batchSize: 500,
      intervalMs: JOURNAL_WRITER_PERIOD_MS,
      sweepIntervalMs: 5_000,
      sweepGraceMs: 5_000,
      trimIntervalMs: JOURNAL_WRITER_PERIOD_MS,
      trimAfterCommit: true,
      now: Date.now,
      ...opts,
    };
    if (this.opts.stream !== undefined && this.opts.sweepIntervalMs > 0) {
      this.sweepTimer = setInterval(() => void this.sweep(), this.opts.sweepIntervalMs);
      this.sweepTimer.unref();
    }
    if (this.opts.stream !== undefined) {
      this.trimTimer = setInterval(() => void this.trim(), this.opts.trimIntervalMs);
      this.trimTimer.unref();
    }
  }

  /** Where commits and failures are reported (metrics); replaces the constructor's hooks. */
  report(hooks: Pick<JournalWriterOptions, 'onCommitted' | 'onError'>): void {
    if (hooks.onCommitted !== undefined) this.opts.onCommitted = hooks.onCommitted;
    if (hooks.onError !== undefined) this.opts.onError = hooks.onError;
  }

  /** Takes a settlement the hot path applied; it is committed at the next flush. */
  add(entry: JournalEntry): void {
    if (this.pending.has(entry.requestId)) return;
    this.pending.set(entry.requestId, entry);
    if (entry.time < this.oldest) this.oldest = entry.time;
    this.schedule();
  }

  /** This writer's uncommitted entries of one account (reconciliation). */
  pendingFor(accountId: string): JournalEntry[] {
    return [...this.pending.values()].filter((e) => e.accountId === accountId);
  }

  lag(): JournalLag {
    if (this.pending.size === 0) return { count: 0, oldestMs: 0 };
    return { count: this.pending.size, oldestMs: Math.max(0, this.opts.now() - this.oldest) };
  }

  /** True while the oldest uncommitted settlement is older than the bound: new requests are refused. */
  behind(): boolean {
    return this.pending.size > 0 && this.opts.now() - this.oldest > this.opts.maxLagMs;
  }

  get maxLagMs(): number {
    return this.opts.maxLagMs;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    const delay = this.failures === 0 ? this.opts.intervalMs : Math.min(MAX_BACKOFF_MS, this.opts.intervalMs * 2 ** this.failures);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delay);
    this.timer.unref();
  }

  /** Commits what is pending (see drain); resolves when this pass is done (it never throws). */
  flush(): Promise<void> {
    this.flushing ??= this.drain().finally(() => {
      this.flushing = undefined;
      if (this.pending.size > 0) this.schedule();
    });
    return this.flushing;
  }

  /**
   * Commits one batch, and more only while full ones wait: a partial batch waits for the next pass
   * (intervalMs, 100 ms, later), so under load each transaction carries many records. One record per
   * transaction costs the gateway ~20 times the CPU per record of a hundred.
   */
  private async drain(): Promise<void> {
    do {
      const batch = this.take(this.opts.batchSize);
      try {
        const r = await commitJournal(this.opts.db, batch);
        // A request a merge found already of record was committed by an earlier transaction (a resurrected
        // Redis stream copy, a writer racing): '0' reads as inside any seed's snapshot, so this writer's
        // catch-up never applies it to a reloaded Redis a second time.
        const added = r.added;
        for (const e of batch) e.recordTx = added === undefined || added.has(e.requestId) ? r.recordTx : '0';
        this.failures = 0;
        this.opts.onCommitted?.(r.records, r.charged, r.merged);
      } catch (err) {
        this.failures++;
        this.opts.onError?.(err, 'commit');
        return;
      }
      for (const e of batch) this.pending.delete(e.requestId);
      this.oldest = Infinity;
      for (const e of this.pending.values()) if (e.time < this.oldest) this.oldest = e.time;
      // Only now, after COMMIT, may the hot path forget them.
      if (this.opts.stream !== undefined) for (const e of batch) if (e.streamId !== undefined) this.committedInStream.push(e);
      if (this.committedInStream.length >= TRIM_BATCH) void this.trim();
    } while (this.pending.size >= this.opts.batchSize);
    // Trimmed as soon as committed, not at the trim period: an entry held for one more period outlived
    // another young collection or two and was promoted, and the gateway paid for it in scavenges and
    // old-space collections. The deletions still go one pass per commit, a commit pause's worth.
    if (this.opts.trimAfterCommit) void this.trim();
  }

  /**
   * Deletes the Redis copies of committed entries, and applies to a Redis seeded again since (a wipe)
   * those its seed did not count. A failed pass is tried again at the next one (bounded: past that, the
   * copies are left to the sweeper, which commits them again as no-ops and deletes them then).
   */
  trim(): Promise<void> {
    this.trimming = this.trimming.then(() => this.trimPass());
    return this.trimming;
  }

  private async trimPass(): Promise<void> {
    const stream = this.opts.stream;
    const done = this.committedInStream;
    if (stream === undefined || done.length === 0) return;
    this.committedInStream = [];
    await stream.remove(done).catch((err: unknown) => {
      this.opts.onError?.(err, 'trim');
      if (this.committedInStream.length + done.length <= MAX_TRIM_BACKLOG) this.committedInStream = done.concat(this.committedInStream);
    });
  }

  /** The oldest `n` pending entries (a Map keeps insertion order). */
  private take(n: number): JournalEntry[] {
    const batch: JournalEntry[] = [];
    for (const e of this.pending.values()) {
      if (batch.length >= n) break;
      batch.push(e);
    }
    return batch;
  }

  /** Adopts stream entries past the grace period (a dead or stalled gateway's); they are committed next. */
  async sweep(): Promise<number> {
    const stream = this.opts.stream;
    if (stream === undefined || this.stopped) return 0;
    try {
      // PostgreSQL lists every account (money in commits there first), so a Redis that lost its own
      // account list still has every stream found.
      const page = await this.opts.db.query<{ id: string }>('SELECT id FROM accounts WHERE id > $1 ORDER BY id LIMIT $2', [this.sweepCursor, SWEEP_ACCOUNTS_PAGE]);
      const ids = page.rows.map((r) => r.id);
      this.sweepCursor = ids.length < SWEEP_ACCOUNTS_PAGE ? '' : (ids[ids.length - 1] ?? '');
      if (ids.length === 0) return 0;
      const found = await stream.sweep(ids, this.opts.now() - this.opts.sweepGraceMs, this.opts.batchSize * 4);
      for (const e of found) this.add(e);
      return found.length;
    } catch (err) {
      this.opts.onError?.(err, 'sweep');
      return 0;
    }
  }

  /**
   * Stops the timers and tries to commit what is left within `timeoutMs`. What is still pending stays
   * in the Redis streams for another gateway's sweeper (the memory hot path has no second copy).
   */
  async close(timeoutMs = 5_000): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    if (this.trimTimer !== undefined) clearInterval(this.trimTimer);
    const deadline = Date.now() + timeoutMs;
    while (this.pending.size > 0 && Date.now() < deadline) {
      await this.flush();
      if (this.pending.size > 0) await new Promise((r) => setTimeout(r, 100));
    }
    if (this.flushing !== undefined) await this.flushing;
    await this.trim();
  }
}
