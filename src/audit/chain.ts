// The audit log's chain: recomputing it (verify), its head (what an operator exports to somewhere they
// trust) and pruning under a retention period without losing the anchor.
//
// Each entry's hash is SHA-256 over one JSON array of its fields, ending with the previous entry's hash.
// The trigger that writes an entry (migration 080) and `verify` below compute that text with the same
// expression; `verify` sends it inline, so a function replaced in the database cannot vouch for itself.
import type { Database, Queryable } from '../record/database.js';

const ENTRY_TEXT = `jsonb_build_array(
    l.seq, to_char(l.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), l.account_id,
    l.actor_kind, l.actor_id, l.actor_label, l.address, l.user_agent, l.action, l.target,
    l.before, l.after, l.request_id, l.prev_hash)::text`;

const PAGE = 2000;

export interface ChainHead {
  /** Entries written since the log began (pruned ones included). */
  seq: number;
  hash: string;
  /** Entries up to this one were pruned; `prunedHash` is the last one's hash, the anchor the rest hangs from. */
  prunedThrough: number;
  prunedHash: string;
}

export type ChainBreak =
  | { seq: number; reason: 'edited'; detail: string }
  | { seq: number; reason: 'out_of_place'; detail: string }
  | { seq: number; reason: 'missing'; detail: string }
  | { seq: number; reason: 'head_mismatch'; detail: string };

export interface ChainReport {
  ok: boolean;
  /** Entries read and checked. */
  checked: number;
  head: ChainHead;
  /** The first entry that does not match; none when ok. */
  firstBreak?: ChainBreak;
}

export async function chainHead(q: Queryable): Promise<ChainHead> {
  const r = await q.query<{ head_seq: number; head_hash: string; pruned_through: number; pruned_hash: string }>(
    'SELECT head_seq, head_hash, pruned_through, pruned_hash FROM audit_chain',
  );
  const row = r.rows[0];
  if (row === undefined) throw new Error('the audit chain has no head row: is migration 080 applied?');
  return { seq: Number(row.head_seq), hash: row.head_hash, prunedThrough: Number(row.pruned_through), prunedHash: row.pruned_hash };
}

interface CheckedRow {
  seq: number;
  prev_hash: string;
  hash: string;
  recomputed: string;
}

/**
 * Recomputes every kept entry's hash and link, in order, and names the first that does not match: an
 * entry edited (its hash is not its contents'), out of place (its link is not the entry before it's hash:
 * reordered, or one before it rewritten with a fresh hash), missing (a gap in the numbers), or a head that
 * the last entry does not reach (entries cut from the end). `expectedHead`, a hash exported earlier,
 * also catches a rewrite of the whole table: it must still be on the chain.
 */
export async function verifyChain(db: Queryable, expectedHead?: { seq: number; hash: string }): Promise<ChainReport> {
  const head = await chainHead(db);
  let prevSeq = head.prunedThrough;
  let prevHash = head.prunedHash;
  let checked = 0;
  let sawExpected = expectedHead === undefined || expectedHead.seq <= head.prunedThrough;
  for (;;) {
    const page = await db.query<CheckedRow>(
      `SELECT l.seq, l.prev_hash, l.hash, encode(sha256(convert_to(${ENTRY_TEXT}, 'UTF8')), 'hex') AS recomputed
         FROM audit_log l WHERE l.seq > $1 ORDER BY l.seq LIMIT ${PAGE}`,
      [prevSeq],
    );
    for (const row of page.rows) {
      const seq = Number(row.seq);
      const fail = (b: ChainBreak): ChainReport => ({ ok: false, checked, head, firstBreak: b });
      if (seq !== prevSeq + 1) return fail({ seq: prevSeq + 1, reason: 'missing', detail: `entry ${prevSeq + 1} is missing (the next kept is ${seq})` });
      if (row.recomputed !== row.hash) return fail({ seq, reason: 'edited', detail: `entry ${seq}'s contents do not give its hash: it was changed after it was written` });
      // A link that does not hold: the entry before was rewritten with a fresh hash (named, when there is
      // one), or this one was moved here from elsewhere.
      if (row.prev_hash !== prevHash) {
        return prevSeq > head.prunedThrough
          ? fail({ seq: prevSeq, reason: 'edited', detail: `entry ${prevSeq} is not the entry ${seq} was written after: it was rewritten, or entries were reordered` })
          : fail({ seq, reason: 'out_of_place', detail: `entry ${seq} does not follow the pruned log's anchor` });
      }
      if (expectedHead !== undefined && seq === expectedHead.seq) {
        if (row.hash !== expectedHead.hash) return fail({ seq, reason: 'edited', detail: `entry ${seq} is not the entry whose hash was exported: the log was rewritten` });
        sawExpected = true;
      }
      prevSeq = seq;
      prevHash = row.hash;
      checked += 1;
    }
    if (page.rows.length < PAGE) break;
  }
  if (prevSeq !== head.seq) {
    return { ok: false, checked, head, firstBreak: { seq: prevSeq + 1, reason: 'head_mismatch', detail: `the log ends at entry ${prevSeq} but its head says ${head.seq}: entries were cut from the end` } };
  }
  if (prevHash !== head.hash) {
    return { ok: false, checked, head, firstBreak: { seq: prevSeq, reason: 'edited', detail: `entry ${prevSeq} is not the entry the head recorded: it was rewritten` } };
  }
  if (!sawExpected) {
    return { ok: false, checked, head, firstBreak: { seq: expectedHead?.seq ?? 0, reason: 'missing', detail: `entry ${expectedHead?.seq ?? 0}, whose hash was exported, is not in the log` } };
  }
  return { ok: true, checked, head };
}

/**
 * Deletes entries older than `before`, keeping the chain verifiable: the last deleted entry's hash becomes
 * the anchor the first kept entry links to. Returns how many were pruned.
 */
export async function pruneChain(db: Database, before: Date): Promise<number> {
  return db.transaction(async (tx) => {
    // The head's lock first, as every entry's writer takes it: a prune never interleaves with a write.
    await tx.query('SELECT head_seq FROM audit_chain FOR UPDATE');
    const last = await tx.query<{ seq: number; hash: string }>(
      'SELECT seq, hash FROM audit_log WHERE at < $1 ORDER BY seq DESC LIMIT 1',
      [before],
    );
    const through = last.rows[0];
    if (through === undefined) return 0;
    await tx.query("SELECT set_config('tollgate.audit_prune', 'on', true)");
    const gone = await tx.query('DELETE FROM audit_log WHERE seq <= $1', [through.seq]);
    await tx.query('UPDATE audit_chain SET pruned_through = $1, pruned_hash = $2', [through.seq, through.hash]);
    return gone.rowCount;
  });
}
