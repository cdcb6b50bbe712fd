// The Redis half of the journal: each account's stream (appended by the settle script under the
// account's hash tag, so it works on a Redis Cluster) is read by sweeps and trimmed only of entries
// PostgreSQL has committed.
import { cacheWrites } from '../billing/money.js';
import { decodeRequestDetail } from '../billing/request-detail.js';
import type { RedisClient } from '../billing/redis-client.js';
import type { JournalEntry } from './journal.js';
import type { JournalStream } from './journal-writer.js';
import type { RequestStatus } from '../billing/ledger.js';
import type { RedisKeys } from '../billing/redis-keys.js';
import { ScriptRunner } from '../billing/scripts.js';
import { SCOPED } from '../billing/buckets.js';

function entryOf(accountId: string, id: string, fields: readonly string[]): JournalEntry {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  const n = (v: string | undefined): number => Number(v ?? 0);
  return {
    requestId: f.rid ?? '',
    accountId,
    keyId: f.key ?? '',
    model: f.model ?? '',
    usage: { input: n(f.in), output: n(f.out), cachedInput: n(f.cin), reasoning: n(f.rsn), ...cacheWrites(n(f.cw5), n(f.cw1)) },
    cost: n(f.cost),
    reserved: n(f.res),
    status: (f.st ?? 'completed') as RequestStatus,
    latencyMs: n(f.lat),
    month: f.month ?? '',
    time: n(f.time),
    streamId: id,
    // The Redis copy that applied it: a sweep of a partly lost Redis finds entries of an earlier copy,
    // which the catch-up applies where the seed did not count them.
    ...(f.gen ? { generation: f.gen } : {}),
    ...(f.seq ? { seq: n(f.seq) } : {}),
    ...(f.d ? { detail: decodeRequestDetail(f.d) } : {}),
    ...(f.team ? { teamId: f.team } : {}),
    ...(f.member ? { memberId: f.member } : {}),
  };
}

/** Entries one trim wave deletes at most (about a millisecond of Redis's time). */
const TRIM_SLICE = 500;

export class RedisJournalStream implements JournalStream {
  private readonly scripts: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
  ) {
    this.scripts = new ScriptRunner(redis);
  }

  /**
   * Catch-up scripts of at most TRIM_SLICE entries each: the stream copies are deleted, and charges a
   * wiped Redis applied before its seed are applied again where the seed did not count them. Scripts
   * go in waves of at most TRIM_SLICE entries in all (one tick each, so auto-pipelining sends a wave
   * together), each wave after the last has answered: Redis runs a pipeline's scripts back to back,
   * and the gateway's own commands queue behind them on the same connection, so one long pass would
   * stall every request in flight.
   */
  async remove(entries: readonly JournalEntry[]): Promise<void> {
    const byAccount = new Map<string, JournalEntry[]>();
    for (const e of entries) {
      if (e.streamId === undefined) continue;
      const list = byAccount.get(e.accountId);
      if (list === undefined) byAccount.set(e.accountId, [e]);
      else list.push(e);
    }
    let wave: Promise<number>[] = [];
    let size = 0;
    for (const [accountId, list] of byAccount) {
      for (let i = 0; i < list.length; i += TRIM_SLICE) {
        const slice = list.slice(i, i + TRIM_SLICE);
        if (size + slice.length > TRIM_SLICE && wave.length > 0) {
          await Promise.all(wave);
          wave = [];
          size = 0;
        }
        wave.push(this.catchUp(accountId, slice));
        size += slice.length;
      }
    }
    await Promise.all(wave);
  }

  /**
   * Usually one short call: the ids and the generations their charges were applied in. Only when one of
   * those is not this Redis's generation (it was wiped and seeded again since), or the account is not
   * loaded while a load is under way, are the charged entries sent: for the script to apply what the
   * seed did not count, or to tell the load under way their commits.
   */
  private async catchUp(accountId: string, entries: readonly JournalEntry[]): Promise<number> {
    const ids = entries.map((e) => e.streamId ?? '');
    const generations = new Set<string>();
    let seq = 0;
    for (const e of entries) {
      if (e.generation !== undefined && e.cost > 0) generations.add(e.generation);
      if (e.seq !== undefined && e.seq > seq) seq = e.seq;
    }
    const keys = [this.keys.account(accountId), this.keys.journal(accountId), this.keys.reload(accountId)];
    const short = await this.scripts.run<number>('catch-up', keys, [String(ids.length), ...ids, String(seq), 'gens', ...generations]);
    if (short !== -1) return short;
    // Each hash whose spend an entry counts (its key, its team, its member), declared once in KEYS.
    const hashAt = new Map<string, number>();
    const indexOf = (name: string): number => {
      let at = hashAt.get(name);
      if (at === undefined) {
        keys.push(this.keys.scoped(accountId, name));
        at = keys.length;
        hashAt.set(name, at);
      }
      return at;
    };
    const checks: string[] = [];
    for (const e of entries) {
      if (e.generation === undefined || e.cost <= 0) continue;
      const at = [indexOf(SCOPED.key(e.keyId))];
      if (e.teamId !== undefined && e.teamId !== '') at.push(indexOf(SCOPED.team(e.teamId)));
      if (e.memberId !== undefined && e.memberId !== '') at.push(indexOf(SCOPED.member(e.memberId)));
      checks.push(e.generation, e.requestId, at.join(','), e.month, String(e.cost), e.recordTx ?? '');
    }
    return this.scripts.run<number>('catch-up', keys, [String(ids.length), ...ids, String(seq), ...checks]);
  }

  async sweep(accountIds: readonly string[], before: number, limit: number): Promise<JournalEntry[]> {
    const found: JournalEntry[] = [];
    const end = String(Math.max(0, Math.floor(before)));
    const pages = await Promise.all(accountIds.map((a) => this.redis.xrange(this.keys.journal(a), '-', end, 'COUNT', limit)));
    accountIds.forEach((a, i) => {
      for (const [id, fields] of pages[i] ?? []) if (found.length < limit) found.push(entryOf(a, id, fields));
    });
    return found;
  }

  /** Every entry still in these accounts' streams (reconciliation: settled, not yet committed). */
  async pending(accountId: string): Promise<JournalEntry[]> {
    const rows = await this.redis.xrange(this.keys.journal(accountId), '-', '+');
    return rows.map(([id, fields]) => entryOf(accountId, id, fields));
  }
}
