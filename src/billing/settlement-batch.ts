// Group commit of settlements: those that arrive within a short window are sent as one script call per
// cluster slot (settle-batch.lua runs settle.lua's body for each), instead of one call each. Settlement
// runs after the answer has gone out (settle/respond-first.ts), so the window never delays an answer.
//
// A lost reply is handled as before: every settlement in the call gets the error, and its caller (the
// settlement queue) settles it again on its own; the settled marker makes a repeat a duplicate, never a
// second charge. A settlement alone in its window goes as a plain settle call, unchanged.
import type { ScriptArg, ScriptRunner } from './scripts.js';

/** The reply of settle.lua for one settlement, as it comes (script-replies.ts reads it). */
export type RawSettleReply = ReadonlyArray<number | string>;

interface Pending {
  keys: readonly string[];
  args: readonly ScriptArg[];
  resolve(reply: RawSettleReply): void;
  reject(err: unknown): void;
}

export interface SettlementBatchOptions {
  /** How long a settlement waits for others of its slot, ms; 0 sends each at once. */
  windowMs: number;
  /** Sent at once when this many are waiting in one slot: bounds the script's run time. */
  maxBatch: number;
}

export class SettlementBatcher {
  private readonly bySlot = new Map<number, Pending[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly scripts: ScriptRunner,
    private readonly opts: SettlementBatchOptions,
  ) {}

  /** Settles through the next batch of `slot`; resolves with this settlement's own reply. */
  run(slot: number, keys: readonly string[], args: readonly ScriptArg[]): Promise<RawSettleReply> {
    if (this.opts.windowMs <= 0) return this.scripts.run<RawSettleReply>('settle', keys, args);
    return new Promise<RawSettleReply>((resolve, reject) => {
      const waiting = this.bySlot.get(slot) ?? [];
      waiting.push({ keys, args, resolve, reject });
      this.bySlot.set(slot, waiting);
      if (waiting.length >= this.opts.maxBatch) {
        this.bySlot.delete(slot);
        this.send(waiting);
      } else if (this.timer === undefined) {
        this.timer = setTimeout(() => this.flush(), this.opts.windowMs);
        // Not unref'd: a settlement waiting for its batch is work the process still owes.
      }
    });
  }

  /** Sends everything waiting now: the window's end. */
  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const groups = [...this.bySlot.values()];
    this.bySlot.clear();
    for (const group of groups) this.send(group);
  }

  private send(group: Pending[]): void {
    if (group.length === 1) {
      const only = group[0] as Pending;
      this.scripts.run<RawSettleReply>('settle', only.keys, only.args).then(only.resolve, only.reject);
      return;
    }
    const keys: string[] = [];
    const args: ScriptArg[] = [group.length];
    for (const p of group) {
      keys.push(...p.keys);
      args.push(p.keys.length, p.args.length, ...p.args);
    }
    this.scripts.run<(RawSettleReply | Error)[]>('settle-batch', keys, args).then(
      (replies) => {
        group.forEach((p, i) => {
          const reply = replies[i];
          // A settlement's own error reply (settle.lua's error_reply) stays its own.
          if (reply instanceof Error) p.reject(reply);
          else if (reply === undefined) p.reject(new Error('the batch settlement returned fewer replies than settlements'));
          else p.resolve(reply);
        });
      },
      (err: unknown) => {
        for (const p of group) p.reject(err);
      },
    );
  }
}
