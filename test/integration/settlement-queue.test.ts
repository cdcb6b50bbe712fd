// The settlement queue over a real ledger that fails for a while: every settlement is applied exactly
// once whatever the failures (including a failure after the ledger applied it, a lost reply), the
// response path makes one attempt only, and shutdown abandons (and reports) only what still fails.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMemoryBackend } from '../../src/billing/backends.js';
import type { Ledger, SettlementRequest } from '../../src/billing/ledger.js';
import { SettlementQueue } from '../../src/settle/settlement-queue.js';

/** A real ledger behind a switch: while `down`, calls fail; `lostReply` applies the call, then fails it. */
function flaky(ledger: Ledger) {
  const state = { down: false, lostReply: false, calls: 0 };
  return {
    state,
    settle: async (req: SettlementRequest) => {
      state.calls += 1;
      if (state.down) throw new Error('ledger unreachable');
      const outcome = await ledger.settle(req);
      if (state.lostReply) throw new Error('reply lost');
      return outcome;
    },
  };
}

async function world(n: number) {
  const backend = createMemoryBackend();
  const account = await backend.accounts.createAccount('q');
  await backend.ledger.credit(account.id, 1_000_000_000, 'start');
  const { record } = await backend.accounts.createKey(account.id, { name: 'q' });
  const reqs: SettlementRequest[] = [];
  for (let i = 0; i < n; i++) {
    const requestId = `req_${i}`;
    const r = await backend.ledger.reserve({ requestId, accountId: account.id, keyId: record.id, amount: 10_000, holdTtlMs: 60_000 });
    expect(r.admitted).toBe(true);
    reqs.push({ requestId, accountId: account.id, keyId: record.id, model: 'm', usage: { input: 10, output: 10, cachedInput: 0, reasoning: 0 }, cost: 1000 + i, status: 'completed', latencyMs: 1 });
  }
  return { backend, accountId: account.id, reqs };
}

describe('settlement queue', () => {
  it('keeps failed settlements and applies each exactly once when the ledger returns (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('down', 'lost', 'ok'), { minLength: 1, maxLength: 12 }), async (modes) => {
        const { backend, accountId, reqs } = await world(modes.length);
        const ledger = flaky(backend.ledger);
        let pendingSeen = 0;
        const settled = new Map<string, number>();
        const queue = new SettlementQueue({ ledger, initialBackoffMs: 1, maxBackoffMs: 5, onPending: (n) => (pendingSeen = Math.max(pendingSeen, n)) });
        for (let i = 0; i < modes.length; i++) {
          ledger.state.down = modes[i] === 'down';
          ledger.state.lostReply = modes[i] === 'lost';
          const before = ledger.state.calls;
          const id = reqs[i]?.requestId ?? '';
          await queue.settle(reqs[i] as SettlementRequest, () => settled.set(id, (settled.get(id) ?? 0) + 1));
          expect(ledger.state.calls - before).toBe(1); // one attempt on the response path
        }
        ledger.state.down = false;
        ledger.state.lostReply = false;
        const flushed = await queue.flush(2000);
        queue.close();
        expect(flushed.abandoned).toBe(0);
        expect(queue.pending).toBe(0);
        for (const r of reqs) expect(settled.get(r.requestId)).toBe(1);
        const audit = await backend.ledger.audit(accountId);
        expect(audit.difference).toBe(0);
        expect(audit.holdsOutstanding).toBe(0);
        expect(audit.usageTotal).toBe(reqs.reduce((s, r) => s + r.cost, 0));
        // Every failed first attempt was kept (a lost reply too: the retry finds it settled, a duplicate).
        if (modes.some((m) => m !== 'ok')) expect(pendingSeen).toBeGreaterThan(0);
        else expect(pendingSeen).toBe(0);
      }),
      { numRuns: 40 },
    );
  });

  it('retries in the background with backoff, without any caller waiting', async () => {
    const { backend, accountId, reqs } = await world(1);
    const ledger = flaky(backend.ledger);
    ledger.state.down = true;
    const queue = new SettlementQueue({ ledger, initialBackoffMs: 5, maxBackoffMs: 20 });
    expect(await queue.settle(reqs[0] as SettlementRequest)).toBeUndefined();
    expect(queue.pending).toBe(1);
    await new Promise((r) => setTimeout(r, 60));
    const failedCalls = ledger.state.calls;
    expect(failedCalls).toBeGreaterThan(2);
    ledger.state.down = false;
    for (let i = 0; i < 50 && queue.pending > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(queue.pending).toBe(0);
    expect((await backend.ledger.audit(accountId)).usageTotal).toBe(reqs[0]?.cost);
    queue.close();
  });

  it('at shutdown abandons only what still fails, reporting each whole', async () => {
    const { backend, reqs } = await world(3);
    const ledger = flaky(backend.ledger);
    ledger.state.down = true;
    const abandoned: SettlementRequest[] = [];
    const logged: string[] = [];
    const queue = new SettlementQueue({ ledger, onAbandoned: (r) => abandoned.push(r), log: (e) => logged.push(e) });
    for (const r of reqs) await queue.settle(r);
    const result = await queue.flush(150);
    queue.close();
    expect(result).toEqual({ settled: 0, abandoned: 3 });
    expect(abandoned.map((r) => r.requestId).sort()).toEqual(reqs.map((r) => r.requestId).sort());
    expect(logged.filter((e) => e === 'settlement_abandoned')).toHaveLength(3);
  });
});
