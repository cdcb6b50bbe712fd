// Stored responses are bounded (issue 29, item 6): a follow-up keeps only what it adds to its previous
// response's context, not the whole context again; each account keeps at most a configured number of
// responses and bytes, oldest first out; a response larger than the whole bound is not kept; a chain
// with a link gone says so. The record's store runs on a real PostgreSQL; the in-process store (a
// gateway without a record) keeps the same bounds and the same retention.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryResponsesStore, RecordResponsesStore, RETENTION_DAYS, type ResponsesStore, type StoredResponse } from '../../src/responses/store.js';
import type { JsonObject } from '../../src/wire/json-shape.js';
import { useTestDatabase } from '../helpers/test-database.js';

const testDb = useTestDatabase('responses_store');

const item = (id: string, bytes = 10): JsonObject => ({ id, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x'.repeat(bytes) }] });
const rid = (): string => `resp_${randomBytes(6).toString('hex')}`;

/** A first response, then follow-ups, each adding one small input and one output to the context. */
async function conversation(store: ResponsesStore, accountId: string, turns: number, firstBytes: number): Promise<StoredResponse[]> {
  const made: StoredResponse[] = [];
  let previous: StoredResponse | undefined;
  for (let t = 0; t < turns; t++) {
    const input = [item(`in_${rid()}`, t === 0 ? firstBytes : 4)];
    const output = [item(`out_${rid()}`, 20)];
    const r: StoredResponse = { id: rid(), accountId, body: { object: 'response', turn: t }, context: [...(previous?.context ?? []), ...input, ...output], inputItems: input, ...(previous === undefined ? {} : { previousId: previous.id }) };
    expect(await store.save(r, [...input, ...output])).toBe(true);
    made.push(r);
    previous = r;
  }
  return made;
}

async function storedBytes(accountId: string): Promise<number[]> {
  const r = await testDb.db.query<{ bytes: number }>('SELECT bytes FROM stored_responses WHERE account_id = $1 ORDER BY created_at, id', [accountId]);
  return r.rows.map((x) => Number(x.bytes));
}

describe('the record\'s stored responses', () => {
  it('a follow-up stores what it adds, not the whole context again; the whole context is read back along the chain', async () => {
    const store = new RecordResponsesStore(testDb.db);
    const a = `acct_${rid()}`;
    const made = await conversation(store, a, 4, 1_000_000);
    const sizes = await storedBytes(a);
    // The first response holds the 1 MB input (in its context, input items and index); the follow-ups
    // a few hundred bytes each, not another megabyte each.
    expect(sizes[0]).toBeGreaterThan(3_000_000);
    for (const s of sizes.slice(1)) expect(s).toBeLessThan(2_000);
    const last = made[made.length - 1] as StoredResponse;
    const back = await store.get(a, last.id);
    expect(back?.context).toEqual(last.context);
    expect(back?.contextLost).toBeUndefined();
    // Another account asking for it finds nothing.
    expect(await store.get(`acct_${rid()}`, last.id)).toBeUndefined();
  });

  it('a chain with a response gone says its context is lost, so a follow-up is refused rather than sent half a conversation', async () => {
    const store = new RecordResponsesStore(testDb.db);
    const a = `acct_${rid()}`;
    const [first, , third] = await conversation(store, a, 3, 10);
    expect(await store.delete(a, first?.id ?? '')).toBe(true);
    const back = await store.get(a, third?.id ?? '');
    expect(back?.contextLost).toBe(true);
  });

  it('each account keeps at most the configured count and bytes, oldest first out; other accounts are untouched', async () => {
    const store = new RecordResponsesStore(testDb.db, Date.now, { maxBytes: 1_000_000, maxCount: 3 });
    const a = `acct_${rid()}`;
    const b = `acct_${rid()}`;
    await conversation(store, b, 2, 10);
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push(...(await conversation(store, a, 1, 10)).map((r) => r.id));
    const kept = (await testDb.db.query<{ id: string }>('SELECT id FROM stored_responses WHERE account_id = $1 ORDER BY created_at', [a])).rows.map((r) => r.id);
    expect(kept).toEqual(made.slice(2));
    expect((await storedBytes(b)).length).toBe(2);

    const bytesBound = new RecordResponsesStore(testDb.db, Date.now, { maxBytes: 30_000, maxCount: 100 });
    const c = `acct_${rid()}`;
    for (let i = 0; i < 5; i++) await conversation(bytesBound, c, 1, 4_000);
    const total = (await storedBytes(c)).reduce((x, y) => x + y, 0);
    expect(total).toBeLessThanOrEqual(30_000);
    expect((await storedBytes(c)).length).toBe(2);
  });

  it('a response larger than the whole bound is not kept (save says so), and nothing else is evicted for it', async () => {
    const store = new RecordResponsesStore(testDb.db, Date.now, { maxBytes: 50_000, maxCount: 100 });
    const a = `acct_${rid()}`;
    await conversation(store, a, 1, 100);
    const big = [item(`in_${rid()}`, 60_000)];
    expect(await store.save({ id: rid(), accountId: a, body: {}, context: big, inputItems: big }, big)).toBe(false);
    expect((await storedBytes(a)).length).toBe(1);
  });
});

describe('the in-process store keeps the same bounds', () => {
  it('bounds count and bytes per account, oldest first, and expires after the retention', async () => {
    let now = Date.now();
    const store = new MemoryResponsesStore({ maxBytes: 1_000_000, maxCount: 3 }, () => now);
    const a = 'acct_mem';
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(...(await conversation(store, a, 1, 10)).map((r) => r.id));
    expect(await store.get(a, ids[0] ?? '')).toBeUndefined();
    expect(await store.get(a, ids[1] ?? '')).toBeUndefined();
    expect(await store.get(a, ids[4] ?? '')).toBeDefined();
    expect(await store.save({ id: rid(), accountId: a, body: {}, context: [item('huge', 2_000_000)], inputItems: [] }, [])).toBe(false);
    now += (RETENTION_DAYS + 1) * 86_400_000;
    expect(await store.get(a, ids[4] ?? '')).toBeUndefined();
  });
});
