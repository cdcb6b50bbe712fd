// Where Responses API objects are kept for previous_response_id, item_reference, GET, DELETE and
// input_items: the record (PostgreSQL or the local run's PGlite), per account, for RETENTION_DAYS.
// Every lookup is by (account, id): another account's response answers exactly like a missing one.
// Storage is bounded: a follow-up keeps only what it adds to its previous response's context (the
// whole context is read back along the chain), and each account keeps at most a configured number of
// responses and bytes, the oldest going first. A response larger than the whole bound is not kept.
import type { Database } from '../record/database.js';
import type { JsonObject } from '../wire/json-shape.js';

export const RETENTION_DAYS = 30;

export interface StoredResponse {
  id: string;
  accountId: string;
  body: JsonObject;
  /** The whole context a follow-up continues from: the previous response's, then this one's input and output. */
  context: JsonObject[];
  inputItems: JsonObject[];
  /** The response this one continued (previous_response_id): its context is the start of this one's. */
  previousId?: string;
  /** Read back with an earlier response of its chain gone (expired, deleted, evicted): `context` is not whole. */
  contextLost?: boolean;
}

/** Per-account bounds of what is kept (oldest first out). */
export interface StoredResponseLimits {
  maxBytes: number;
  maxCount: number;
}

export const DEFAULT_STORED_RESPONSE_LIMITS: StoredResponseLimits = { maxBytes: 256 * 1024 * 1024, maxCount: 10_000 };

export interface ResponsesStore {
  get(accountId: string, id: string): Promise<StoredResponse | undefined>;
  /** Keeps the response and indexes its input and output items by id; false when it is larger than the account's whole bound (not kept). */
  save(r: StoredResponse, items: JsonObject[]): Promise<boolean>;
  delete(accountId: string, id: string): Promise<boolean>;
  /** Stored items of this account by id (those not found are absent). */
  items(accountId: string, ids: readonly string[]): Promise<Map<string, JsonObject>>;
}

const idOf = (item: JsonObject): string | undefined => (typeof item.id === 'string' && item.id !== '' ? item.id : undefined);

/** Expired responses are deleted at most this often per process (not on every save). */
const PURGE_EVERY_MS = 10 * 60 * 1000;

interface Encoded {
  body: string;
  ownContext: string;
  inputItems: string;
  items: Array<{ id: string; json: string }>;
  bytes: number;
}

/** The response as it is written: `ownContext` is what it adds to the previous response's (all of it without one). */
function encode(r: StoredResponse, ownContext: JsonObject[], items: JsonObject[]): Encoded {
  const body = JSON.stringify(r.body);
  const own = JSON.stringify(ownContext);
  const input = JSON.stringify(r.inputItems);
  let bytes = Buffer.byteLength(body) + Buffer.byteLength(own) + Buffer.byteLength(input);
  const indexed: Array<{ id: string; json: string }> = [];
  for (const item of items) {
    const id = idOf(item);
    if (id === undefined) continue;
    const json = JSON.stringify(item);
    bytes += Buffer.byteLength(json);
    indexed.push({ id, json });
  }
  return { body, ownContext: own, inputItems: input, items: indexed, bytes };
}

// The context along the chain, oldest first: each response's own part, from the first response on. A
// chain with a link gone (expired or evicted) has no whole context: the follow-up is told so.
const CHAIN_SQL = `
WITH RECURSIVE chain AS (
  SELECT id, previous_id, context, 0 AS depth FROM stored_responses
   WHERE id = $1 AND account_id = $2 AND created_at > now() - make_interval(days => $3)
  UNION ALL
  SELECT p.id, p.previous_id, p.context, c.depth + 1 FROM stored_responses p JOIN chain c ON p.id = c.previous_id
   WHERE p.account_id = $2 AND p.created_at > now() - make_interval(days => $3) AND c.depth < 10000
)
SELECT id, previous_id, context FROM chain ORDER BY depth DESC`;

export class RecordResponsesStore implements ResponsesStore {
  private lastPurge = 0;

  constructor(
    private readonly db: Database,
    private readonly now: () => number = Date.now,
    private readonly limits: StoredResponseLimits = DEFAULT_STORED_RESPONSE_LIMITS,
  ) {}

  async get(accountId: string, id: string): Promise<StoredResponse | undefined> {
    const r = await this.db.query<{ body: JsonObject; input_items: JsonObject[]; previous_id: string | null }>(
      `SELECT body, input_items, previous_id FROM stored_responses WHERE id = $1 AND account_id = $2 AND created_at > now() - make_interval(days => $3)`,
      [id, accountId, RETENTION_DAYS],
    );
    const row = r.rows[0];
    if (row === undefined) return undefined;
    const chain = await this.db.query<{ id: string; previous_id: string | null; context: JsonObject[] }>(CHAIN_SQL, [id, accountId, RETENTION_DAYS]);
    const first = chain.rows[0];
    // The oldest link found must be a first response; otherwise a link is gone and the context is not whole.
    const whole = first !== undefined && first.previous_id === null;
    const context = whole ? chain.rows.flatMap((c) => c.context) : undefined;
    return { id, accountId, body: row.body, context: context ?? [], inputItems: row.input_items, ...(row.previous_id === null ? {} : { previousId: row.previous_id }), ...(whole ? {} : { contextLost: true }) };
  }

  async save(r: StoredResponse, items: JsonObject[]): Promise<boolean> {
    // Expired responses go as new ones come (their items cascade), once in a while, off the transaction.
    if (this.now() - this.lastPurge > PURGE_EVERY_MS) {
      this.lastPurge = this.now();
      await this.db.query('DELETE FROM stored_responses WHERE created_at < now() - make_interval(days => $1)', [RETENTION_DAYS]);
    }
    let previousId: string | null = null;
    let ownContext = r.context;
    if (r.previousId !== undefined) {
      const prev = await this.db.query<{ context_length: number | null }>('SELECT context_length FROM stored_responses WHERE id = $1 AND account_id = $2', [r.previousId, r.accountId]);
      const length = prev.rows[0]?.context_length;
      if (length !== null && length !== undefined && length <= r.context.length) {
        previousId = r.previousId;
        ownContext = r.context.slice(length);
      }
    }
    const e = encode(r, ownContext, items);
    if (e.bytes > this.limits.maxBytes || this.limits.maxCount === 0) return false;
    await this.db.transaction(async (tx) => {
      await tx.query(
        'INSERT INTO stored_responses (id, account_id, body, context, input_items, previous_id, context_length, bytes) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5::jsonb, $6, $7, $8)',
        [r.id, r.accountId, e.body, e.ownContext, e.inputItems, previousId, r.context.length, e.bytes],
      );
      for (const item of e.items) {
        await tx.query(
          `INSERT INTO stored_response_items (account_id, id, response_id, item) VALUES ($1, $2, $3, $4::jsonb)
           ON CONFLICT (account_id, id) DO UPDATE SET response_id = EXCLUDED.response_id, item = EXCLUDED.item`,
          [r.accountId, item.id, r.id, item.json],
        );
      }
      // The account's bound, oldest first out: a running total newest to oldest, and what passes it goes.
      await tx.query(
        `DELETE FROM stored_responses WHERE id IN (
           SELECT id FROM (
             SELECT id, sum(bytes) OVER w AS total, row_number() OVER w AS n FROM stored_responses
              WHERE account_id = $1 WINDOW w AS (ORDER BY created_at DESC, id DESC)
           ) ranked WHERE total > $2 OR n > $3)`,
        [r.accountId, this.limits.maxBytes, this.limits.maxCount],
      );
    });
    return true;
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    return (await this.db.query('DELETE FROM stored_responses WHERE id = $1 AND account_id = $2', [id, accountId])).rowCount > 0;
  }

  async items(accountId: string, ids: readonly string[]): Promise<Map<string, JsonObject>> {
    const found = new Map<string, JsonObject>();
    if (ids.length === 0) return found;
    const r = await this.db.query<{ id: string; item: JsonObject }>('SELECT id, item FROM stored_response_items WHERE account_id = $1 AND id = ANY($2::text[])', [accountId, [...ids]]);
    for (const row of r.rows) found.set(row.id, row.item);
    return found;
  }
}

/**
 * For a gateway without a record (tests, bench): kept in this process only, with the same retention
 * and per-account bounds as the record's. The context is shared with the previous response's object,
 * not copied, so a conversation costs what it adds.
 */
export class MemoryResponsesStore implements ResponsesStore {
  /** Insertion order is age order: the oldest first out. */
  private readonly responses = new Map<string, { r: StoredResponse; bytes: number; at: number; itemIds: string[] }>();
  private readonly itemsById = new Map<string, JsonObject>();
  private readonly usage = new Map<string, { bytes: number; count: number }>();

  constructor(
    private readonly limits: StoredResponseLimits = DEFAULT_STORED_RESPONSE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  private live(id: string): StoredResponse | undefined {
    const e = this.responses.get(id);
    if (e === undefined) return undefined;
    if (this.now() - e.at > RETENTION_DAYS * 86_400_000) {
      this.remove(id);
      return undefined;
    }
    return e.r;
  }

  private remove(id: string): void {
    const e = this.responses.get(id);
    if (e === undefined) return;
    this.responses.delete(id);
    for (const itemId of e.itemIds) this.itemsById.delete(itemId);
    const u = this.usage.get(e.r.accountId);
    if (u !== undefined) {
      u.bytes -= e.bytes;
      u.count -= 1;
    }
  }

  async get(accountId: string, id: string): Promise<StoredResponse | undefined> {
    const r = this.live(id);
    return r?.accountId === accountId ? r : undefined;
  }

  async save(r: StoredResponse, items: JsonObject[]): Promise<boolean> {
    const prev = r.previousId === undefined ? undefined : this.live(r.previousId);
    const own = prev !== undefined && prev.context.length <= r.context.length ? r.context.slice(prev.context.length) : r.context;
    const e = encode(r, own, items);
    if (e.bytes > this.limits.maxBytes || this.limits.maxCount === 0) return false;
    const itemIds = e.items.map((i) => `${r.accountId} ${i.id}`);
    this.responses.set(r.id, { r, bytes: e.bytes, at: this.now(), itemIds });
    items.forEach((item) => {
      const id = idOf(item);
      if (id !== undefined) this.itemsById.set(`${r.accountId} ${id}`, item);
    });
    const u = this.usage.get(r.accountId) ?? { bytes: 0, count: 0 };
    u.bytes += e.bytes;
    u.count += 1;
    this.usage.set(r.accountId, u);
    // Oldest of this account first out, until it is within its bound (expired ones of any account too).
    for (const [id, entry] of this.responses) {
      if (u.bytes <= this.limits.maxBytes && u.count <= this.limits.maxCount) break;
      if (entry.r.accountId === r.accountId && id !== r.id) this.remove(id);
    }
    return true;
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const r = this.live(id);
    if (r?.accountId !== accountId) return false;
    this.remove(id);
    return true;
  }

  async items(accountId: string, ids: readonly string[]): Promise<Map<string, JsonObject>> {
    const found = new Map<string, JsonObject>();
    for (const id of ids) {
      const item = this.itemsById.get(`${accountId} ${id}`);
      if (item !== undefined) found.set(id, item);
    }
    return found;
  }
}
