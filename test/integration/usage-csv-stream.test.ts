// The usage CSV streams (issue 29, item 6): a page of records is read only when the client has taken
// the one before, so an export of any size holds one page in memory; every record and the total are in
// it; a bad filter is still a 400 before anything is sent. Real PostgreSQL; the database is counted, not
// replaced, to see when pages are read.
import { describe, expect, it } from 'vitest';
import type { RequestStatus } from '../../src/billing/ledger.js';
import { DashboardError } from '../../src/dashboard/errors.js';
import { usageCsvStream } from '../../src/dashboard/usage-view.js';
import type { Database } from '../../src/record/database.js';
import { useTestDatabase } from '../helpers/test-database.js';

const testDb = useTestDatabase('usage_csv');
const RECORDS = 5_500;

/** The same database, counting the usage pages read. */
function counting(db: Database): { db: Database; pages: () => number } {
  let pages = 0;
  const counted: Database = Object.create(db) as Database;
  counted.query = ((text: string, values?: unknown[], opts?: unknown) => {
    if (/FROM usage_records/i.test(text)) pages++;
    return (db.query as (t: string, v?: unknown[], o?: unknown) => ReturnType<Database['query']>)(text, values, opts);
  }) as Database['query'];
  return { db: counted, pages: () => pages };
}

describe('usage CSV export', () => {
  it('streams page by page, with every record and the total', async () => {
    const db = testDb.db;
    await db.query(`INSERT INTO accounts (id, name) VALUES ('acct_csv', 'csv')`);
    await db.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, input_tokens, output_tokens, cost, reserved, status, billing_month, started_at, finished_at)
       SELECT 'req_' || lpad(g::text, 6, '0'), 'acct_csv', 'key_csv', 'm', 10, 5, g, g, 'completed', '2026-11',
              now() - make_interval(secs => g + 1), now() - make_interval(secs => g)
         FROM generate_series(1, ${RECORDS}) AS g`,
    );
    const c = counting(db);
    const stream = await usageCsvStream(c.db, 'acct_csv', {}, new Map([['key_csv', 'ci']]));
    // Only the first page has been read when the stream is handed back.
    expect(c.pages()).toBe(1);
    const chunks: string[] = [];
    let rows = 0;
    let mostAhead = 0;
    for await (const chunk of stream) {
      const text = String(chunk);
      chunks.push(text);
      rows += text.split('\r\n').length - 1;
      // Pages read beyond what the client has received: at most one (not all six at once).
      mostAhead = Math.max(mostAhead, c.pages() - Math.ceil(rows / 1000));
    }
    expect(mostAhead).toBeLessThanOrEqual(1);
    expect(c.pages()).toBe(Math.ceil(RECORDS / 1000));
    const lines = chunks.join('').trimEnd().split('\r\n');
    expect(lines[0]).toMatch(/^finished_at,request_id,key_id,key_name,/);
    expect(lines.length).toBe(RECORDS + 2);
    expect(lines[1]).toContain(',req_000001,key_csv,ci,');
    const total = (RECORDS * (RECORDS + 1)) / 2;
    expect(lines[lines.length - 1]).toContain(`,${total},`);
  });

  it('a bad filter is refused before anything is sent', async () => {
    await expect(usageCsvStream(testDb.db, 'acct_csv', { status: 'nope' as RequestStatus }, new Map())).rejects.toBeInstanceOf(DashboardError);
  });
});
