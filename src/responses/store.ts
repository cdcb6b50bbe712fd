// Where Responses API objects are kept for previous_response_id, item_reference, GET, DELETE and
// input_items: the record (PostgreSQL or the local run's PGlite), per account, for RETENTION_DAYS.
// Every lookup is by (account, id): another account's response answers exactly like a missing one.
import type { Database } from '../record/database.js';
import type { JsonObject } from '../translate/internal/json.js';

export const RETENTION_DAYS = 30;

export interface StoredResponse {
  id: string;
  accountId: string;
  body: JsonObject;
  context: JsonObject[];
  inputItems: JsonObject[];
}

export interface ResponsesStore {
  get(accountId: string, id: string): Promise<StoredResponse | undefined>;
  /** Keeps the response and indexes its input and output items by id. */
  save(r: StoredResponse, items: JsonObject[]): Promise<void>;
  delete(accountId: string, id: string): Promise<boolean>;
  /** Stored items of this account by id (those not found are absent). */
  items(accountId: string, ids: readonly string[]): Promise<Map<string, JsonObject>>;
}

const idOf = (item: JsonObject): string | undefined => (typeof item.id === 'string' && item.id !== '' ? item.id : undefined);

/** Expired responses are deleted at most this often per process (not on every save). */
const PURGE_EVERY_MS = 10 * 60 * 1000;

export class RecordResponsesStore implements ResponsesStore {
  private lastPurge = 0;

  constructor(
    private readonly db: Database,
    private readonly now: () => number = Date.now,
  ) {}

  async get(accountId: string, id: string): Promise<StoredResponse | undefined> {
    const r = await this.db.query<{ body: JsonObject; context: JsonObject[]; input_items: JsonObject[] }>(
      `SELECT body, context, input_items FROM stored_responses WHERE id = $1 AND account_id = $2 AND created_at > now() - make_interval(days => $3)`,
      [id, accountId, RETENTION_DAYS],
    );
    const row = r.rows[0];
    return row === undefined ? undefined : { id, accountId, body: row.body, context: row.context, inputItems: row.input_items };
  }

  async save(r: StoredResponse, items: JsonObject[]): Promise<void> {
    // Expired responses go as new ones come (their items cascade), once in a while, off the transaction.
    if (this.now() - this.lastPurge > PURGE_EVERY_MS) {
      this.lastPurge = this.now();
      await this.db.query('DELETE FROM stored_responses WHERE created_at < now() - make_interval(days => $1)', [RETENTION_DAYS]);
    }
    await this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO stored_responses (id, account_id, body, context, input_items) VALUES ($1, $2, $3::jsonb, $4::jsonb, $5::jsonb)', [
        r.id,
        r.accountId,
        JSON.stringify(r.body),
        JSON.stringify(r.context),
        JSON.stringify(r.inputItems),
      ]);
      for (const item of items) {
        const id = idOf(item);
        if (id === undefined) continue;
        await tx.query(
          `INSERT INTO stored_response_items (account_id, id, response_id, item) VALUES ($1, $2, $3, $4::jsonb)
           ON CONFLICT (account_id, id) DO UPDATE SET response_id = EXCLUDED.response_id, item = EXCLUDED.item`,
          [r.accountId, id, r.id, JSON.stringify(item)],
        );
      }
    });
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

/** For a gateway without a record (tests, bench): kept in this process only. */
export class MemoryResponsesStore implements ResponsesStore {
  private readonly responses = new Map<string, StoredResponse>();
  private readonly itemsById = new Map<string, JsonObject>();

  async get(accountId: string, id: string): Promise<StoredResponse | undefined> {
    const r = this.responses.get(id);
    return r?.accountId === accountId ? r : undefined;
  }

  async save(r: StoredResponse, items: JsonObject[]): Promise<void> {
    this.responses.set(r.id, r);
    for (const item of items) {
      const id = idOf(item);
      if (id !== undefined) this.itemsById.set(`${r.accountId} ${id}`, item);
    }
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const r = this.responses.get(id);
    if (r?.accountId !== accountId) return false;
    this.responses.delete(id);
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
