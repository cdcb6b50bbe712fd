// The one place the Redis ledger's script replies are read: each script answers a flat list (what Lua can
// return), and these decoders give its values names and types. The positions are the scripts' (see the
// header of reserve.lua and settle.lua); nothing else reads them.
import type { BucketReading } from '../limits/admission.js';
import { isRefusalReason, type RefusalReason } from '../limits/limits.js';
import type { Bucket } from './buckets.js';

/** What reserve.lua answered. */
export type ReserveReply =
  | {
      kind: 'admitted';
      /** The generation of the account's Redis copy ('' when it is not loaded from the record). */
      generation: string;
      /** The account's seq after the hold (see lua/common.lua). */
      seq: number;
      /** This hold made its slot's reaper index non-empty: the gateway names the slot to the reaper. */
      announce: boolean;
      /** The buckets after the request was counted; none on a retried reservation of a request already held. */
      readings: BucketReading[];
      /** Milliseconds until the rate limits' window starts again. */
      resetMs: number;
    }
  | {
      kind: 'refused';
      reason: RefusalReason;
      needed: number;
      available: number;
      availableOverall: number;
      /** The buckets as they stood; none when the key itself was refused (unknown, revoked). */
      readings: BucketReading[];
      resetMs: number;
      /** The `name` of the binding limit's scope (a team's) and of the account; '' when not kept. */
      scopeName: string;
      accountName: string;
    }
  | { kind: 'not_seeded' }
  | { kind: 'rebuilding'; retryAfterMs: number };

type Flat = ReadonlyArray<number | string | null | undefined>;

/** Each bucket's figures, (limit, used) pairs from `at` on, in the order of `buckets`; none when absent. */
function readingsAt(reply: Flat, at: number, buckets: readonly Bucket[]): BucketReading[] {
  if (reply.length < at + 2 * buckets.length) return [];
  return buckets.map((b, i) => {
    const limit = Number(reply[at + 2 * i]);
    return { reason: b.reason, unit: b.unit, limit: limit < 0 ? undefined : limit, used: Number(reply[at + 2 * i + 1]) };
  });
}

export function decodeReserveReply(reply: Flat, buckets: readonly Bucket[]): ReserveReply {
  switch (Number(reply[0])) {
    case 1:
      return {
        kind: 'admitted',
        generation: String(reply[1] ?? ''),
        seq: Number(reply[2] ?? 0),
        announce: Number(reply[3]) === 1,
        resetMs: Number(reply[4] ?? 0),
        readings: readingsAt(reply, 5, buckets),
      };
    case 0: {
      const reason = String(reply[1]);
      if (!isRefusalReason(reason)) throw new Error(`the reserve script refused for an undeclared reason: ${reason}`);
      return {
        kind: 'refused',
        reason,
        needed: Number(reply[2]),
        available: Number(reply[3]),
        availableOverall: Number(reply[4]),
        resetMs: Number(reply[5] ?? 0),
        readings: readingsAt(reply, 6, buckets),
        // After the figures: what the refusal names (reserve.lua).
        scopeName: String(reply[6 + 2 * buckets.length] ?? ''),
        accountName: String(reply[7 + 2 * buckets.length] ?? ''),
      };
    }
    case -1:
      return { kind: 'not_seeded' };
    case -2:
      return { kind: 'rebuilding', retryAfterMs: Number(reply[1]) };
    default:
      throw new Error(`the reserve script answered ${JSON.stringify(reply)}`);
  }
}

/** What settle.lua answered for one settlement. */
export type SettleReply =
  | {
      kind: 'settled';
      charged: number;
      released: number;
      duplicate: boolean;
      late: boolean;
      /** Present when journaled: the settlement's copy in the account's journal stream. */
      journal?: { entryId: string; month: string; reserved: number; generation: string; seq: number | undefined };
    }
  | { kind: 'not_seeded' };

export function decodeSettleReply(reply: Flat): SettleReply {
  if (Number(reply[0]) === -1) return { kind: 'not_seeded' };
  const out: SettleReply = {
    kind: 'settled',
    charged: Number(reply[0]),
    released: Number(reply[1]),
    duplicate: Number(reply[2]) === 1,
    late: Number(reply[3]) === 1,
  };
  if (reply[4] !== undefined && reply[4] !== null) {
    out.journal = {
      entryId: String(reply[4]),
      month: String(reply[5] ?? ''),
      reserved: Number(reply[6] ?? 0),
      generation: String(reply[7] ?? ''),
      seq: reply[8] === undefined || reply[8] === null ? undefined : Number(reply[8]),
    };
  }
  return out;
}
