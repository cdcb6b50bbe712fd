// The handle to the system of record: a real PostgreSQL (node-postgres pool) when DATABASE_URL is set,
// else an embedded PGlite for the one-machine run. Both speak the same SQL and the same small interface,
// so every module of the record, the dashboard and payments is written once.
import type { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { actorSetting, currentActor, mayWrite } from './change-actor.js';

export type SqlValue = string | number | boolean | null | Date | Buffer | readonly (string | null)[] | readonly number[];

export interface QueryResult<R> {
  rows: R[];
  /** Rows inserted, updated or deleted (0 for a SELECT on PGlite). */
  rowCount: number;
}

export interface QueryOptions {
  /**
   * A name the server keeps the statement's parse and plan under, per connection: for a statement run
   * many times a second (the journal's commit), whose planning was ~1 ms of PostgreSQL's time each run.
   * One name is one text. PGlite runs in this process and ignores it.
   */
  prepareAs?: string;
}

/** Anything that runs SQL: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly SqlValue[], opts?: QueryOptions): Promise<QueryResult<R>>;
  /** Runs a script of several statements, without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/** An open transaction: what it runs commits or rolls back together. */
export interface Transaction extends Queryable {
  /**
   * Loads `rows`, in COPY's text format (tab between fields, newline after each row, `\\N` for NULL),
   * into `target` (`table (col, ...)`). COPY stores a batch for about a third less of the server's CPU
   * than INSERT ... SELECT (it writes a page's worth of rows per WAL record), but it has no ON CONFLICT:
   * one row that is already there fails the whole statement, and with it the transaction.
   */
  copyIn(target: string, rows: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const INT8_OID = 20;

// Hands the audit triggers who is acting (src/record/change-actor.ts), for this transaction only.
const NAME_ACTOR = "SELECT set_config('tollgate.actor', $1, true)";

// Money is bigint micro-USD in the database and a JS number (an exact integer below 2^53) in code:
// a value past that would silently lose cents, so it fails loudly instead.
function parseInt8(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`a bigint column holds ${value}, past the largest exact integer`);
  return n;
}

export async function openPostgres(connectionString: string, opts: { max?: number } = {}): Promise<Database> {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server emits 'error' on the pool; without a listener that kills the
  // process. The next query on a fresh client reports the outage where it can be handled.
  pool.on('error', () => undefined);
  const run = async <R>(q: pg.Pool | pg.PoolClient, text: string, params?: readonly SqlValue[], opts?: QueryOptions): Promise<QueryResult<R>> => {
    const values = params as unknown[] | undefined;
    const r = await (opts?.prepareAs === undefined ? q.query(text, values) : q.query({ name: opts.prepareAs, text, values }));
    return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
  };
  const copy = (client: pg.PoolClient, target: string, rows: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = client.query(copyFrom(`COPY ${target} FROM STDIN`));
      // 'finish' comes once the server has confirmed the COPY, 'error' when it refused it.
      stream.on('finish', resolve);
      stream.on('error', reject);
      stream.end(rows);
    });
  const db: Database = {
    kind: 'postgres',
    query: (text, params, opts) =>
      currentActor() !== undefined && mayWrite(text) ? db.transaction((tx) => tx.query(text, params, opts)) : run(pool, text, params, opts),
    exec: async (script) => {
      await pool.query(script);
    },
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const actor = currentActor();
        if (actor !== undefined) await client.query(NAME_ACTOR, [actorSetting(actor)]);
        const result = await fn({
          query: (text, params, opts) => run(client, text, params, opts),
          exec: async (script) => {
            await client.query(script);
          },
          copyIn: (target, rows) => copy(client, target, rows),
        });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
  return db;
}

/** `dataDir` undefined: in memory (tests); else persisted in that folder. */
export async function openPglite(dataDir?: string): Promise<Database> {
  // Loaded here only: a gateway on PostgreSQL does not carry PGlite's module (1 MB of heap at idle).
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create(dataDir === undefined ? {} : { dataDir });
  const parsers = { [INT8_OID]: parseInt8 };
  const run = async <R>(q: Pick<PGlite, 'query'>, text: string, params?: readonly SqlValue[]): Promise<QueryResult<R>> => {
    const r = await q.query<R>(text, params as unknown[] | undefined, { parsers });
    return { rows: r.rows, rowCount: r.affectedRows ?? 0 };
  };
  // PGlite has no client stream: COPY reads its rows from a blob it names /dev/blob.
  const copy = async (q: Pick<PGlite, 'query'>, target: string, rows: string): Promise<void> => {
    await q.query(`COPY ${target} FROM '/dev/blob'`, [], { blob: new Blob([rows]) });
  };
  const handle: Database = {
    kind: 'pglite',
    query: (text, params) =>
      currentActor() !== undefined && mayWrite(text) ? handle.transaction((tx) => tx.query(text, params)) : run(db, text, params),
    exec: async (script) => {
      await db.exec(script);
    },
    transaction: (fn) =>
      db.transaction(async (tx) => {
        const actor = currentActor();
        if (actor !== undefined) await tx.query(NAME_ACTOR, [actorSetting(actor)]);
        return fn({
          query: (text, params) => run(tx, text, params),
          exec: async (script) => {
            await tx.exec(script);
          },
          copyIn: (target, rows) => copy(tx, target, rows),
        });
      }),
    close: () => db.close(),
  };
  return handle;
}

export interface DatabaseLocation {
  /** A PostgreSQL connection string; wins when set. */
  url?: string;
  /** PGlite's data folder when there is no URL; undefined keeps it in memory. */
  dataDir?: string;
}

export function openDatabase(where: DatabaseLocation): Promise<Database> {
  return where.url !== undefined && where.url !== '' ? openPostgres(where.url) : openPglite(where.dataDir);
}
