// Unknown keys cost nothing but the refusal (issue 37, item 7). On 7755709 every well-formed key Redis did
// not know was looked up in PostgreSQL: a stream of made-up keys was a stream of queries on the record
// the journal and the dashboard depend on, and the refusal of a key one character off a real one took a
// different time from a random one's. Now Redis holds the directory of every key's hash (loaded whole
// from the record after it lost its data), an unknown hash is refused from Redis alone, a late push is
// found through a small per-gateway budget of record look-ups, and refusals per address are throttled.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/accounts/api-key.js';
import { openPostgres, type Database, type QueryOptions, type SqlValue } from '../../src/record/database.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { startRedisServer, type OwnRedisProcess } from '../helpers/redis-server.js';
import { createTestDatabase } from '../helpers/test-database.js';

/** The record as the gateway uses it, with every statement that reads the keys table counted. */
function counted(db: Database): { db: Database; keyQueries: () => number } {
  let n = 0;
  // The key sweeper's periodic pass (keys whose push is behind) runs whatever the traffic; it is not a
  // look-up of a presented key, so it is left out of the count.
  const note = (sql: string): void => {
    if (/\bapi_keys\b/.test(sql) && !/hot_version\s*<\s*version/.test(sql)) n++;
  };
  const wrapped: Database = {
    kind: db.kind,
    query: (sql, params, opts) => {
      note(sql);
      return db.query(sql, params, opts);
    },
    exec: (script) => {
      note(script);
      return db.exec(script);
    },
    transaction: (fn) =>
      db.transaction((tx) =>
        fn(
          Object.assign(Object.create(tx) as typeof tx, {
            query: ((sql: string, params?: readonly SqlValue[], opts?: QueryOptions) => {
              note(sql);
              return tx.query(sql, params, opts);
            }) as typeof tx.query,
          }),
        ),
      ),
    close: () => db.close(),
  };
  return { db: wrapped, keyQueries: () => n };
}

/** Calls of each Redis command so far, from Redis's own statistics. */
async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] ?? '', Number(m[2]));
  return calls;
}

function difference(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const d: Record<string, number> = {};
  for (const [command, calls] of after) {
    const delta = calls - (before.get(command) ?? 0);
    if (delta > 0 && command !== 'info') d[command] = delta;
  }
  return d;
}

async function ask(baseUrl: string, key: string, path = '/v1/chat/completions'): Promise<Response> {
  const body =
    path === '/v1/messages'
      ? { model: 'outlaw-1-xploded', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }
      : { model: 'outlaw-1-xploded', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] };
  return fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });
}

/** Keys one character off the real one, each different: every position of its random part, a few letters each. */
function nearMisses(key: string, count: number): string[] {
  const out: string[] = [];
  const start = 'sk-tg-'.length;
  for (let i = start; out.length < count && i < key.length; i++) {
    for (const c of 'QRSTU') {
      if (key[i] !== c && out.length < count) out.push(key.slice(0, i) + c + key.slice(i + 1));
    }
  }
  return out;
}

let redisServer: OwnRedisProcess;
let database: { url: string; drop(): Promise<void> };
let record: Database;
let probe: Redis;

beforeAll(async () => {
  redisServer = await startRedisServer({});
  database = await createTestDatabase('unknownkeys');
  record = await openPostgres(database.url, { max: 4 });
  probe = new Redis(redisServer.url);
}, 60_000);

afterAll(async () => {
  probe.disconnect();
  await record.close();
  await database.drop();
  await redisServer.stop();
});

async function gateway(config: { keyRefusalsPerMinute: number; keyCacheTtlMs?: number }, lookupsPerSecond = 5): Promise<{ h: Harness; keyQueries: () => number }> {
  const { db, keyQueries } = counted(record);
  const h = await startHarness({
    ledger: 'redis',
    redisUrl: redisServer.url,
    record: db,
    recordOptions: { unknownKeyLookupsPerSecond: lookupsPerSecond },
    config,
  });
  return { h, keyQueries };
}

/**
 * Each harness has a Redis namespace of its own, new to the directory: the first unknown key loads it
 * from the record (one page, one query), as after a wipe. Returns the queries that took.
 */
async function loadDirectory(h: Harness, keyQueries: () => number): Promise<number> {
  const before = keyQueries();
  expect((await ask(h.baseUrl, generateApiKey('tg'))).status).toBe(401);
  return keyQueries() - before;
}

describe('unknown keys cost nothing but the refusal', () => {
  it('10,000 random well-formed keys make at most the budget of record queries, and every one is a 401', async () => {
    const { h, keyQueries } = await gateway({ keyRefusalsPerMinute: 0 });
    try {
      // The real key works (and the first lookup after start loads the directory if Redis lacks it).
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      // The directory's load: one query for its one page (the budget's first look-up may add one).
      expect(await loadDirectory(h, keyQueries)).toBeLessThanOrEqual(2);
      const before = keyQueries();
      const started = Date.now();
      const statuses = new Map<number, number>();
      const keys = Array.from({ length: 10_000 }, () => generateApiKey('tg'));
      let next = 0;
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          while (next < keys.length) {
            const key = keys[next++] ?? '';
            const res = await ask(h.baseUrl, key);
            await res.arrayBuffer();
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          }
        }),
      );
      const seconds = (Date.now() - started) / 1000;
      const queries = keyQueries() - before;
      expect(Object.fromEntries(statuses)).toEqual({ 401: 10_000 });
      // The budget: 5 a second with a burst of 5. On 7755709 this was one query per request.
      expect(queries).toBeLessThanOrEqual(5 + Math.ceil(5 * seconds));
      expect(queries).toBeLessThan(10_000 / 20);
    } finally {
      await h.close();
    }
  }, 120_000);

  it('with no budget, a flood of unknown keys makes no record query at all; the real key still works', async () => {
    const { h, keyQueries } = await gateway({ keyRefusalsPerMinute: 0 }, 0);
    try {
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      expect(await loadDirectory(h, keyQueries)).toBe(1);
      const before = keyQueries();
      for (let i = 0; i < 300; i++) expect((await ask(h.baseUrl, generateApiKey('tg'))).status).toBe(401);
      expect(keyQueries() - before).toBe(0);
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
    } finally {
      await h.close();
    }
  }, 60_000);

  it('a key one character off a real key and a random key are refused by the same work: the same Redis commands, no record query', async () => {
    const { h, keyQueries } = await gateway({ keyRefusalsPerMinute: 0 }, 0);
    try {
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      expect(await loadDirectory(h, keyQueries)).toBe(1);
      await h.settled();
      await new Promise((r) => setTimeout(r, 300)); // let the settlement's group commit and journal go by
      const work = async (keys: string[]): Promise<{ commands: Record<string, number>; queries: number }> => {
        const q0 = keyQueries();
        const c0 = await commandCalls(probe);
        // Each key once: a repeated key would be answered from the gateway's short negative cache.
        expect(new Set(keys).size).toBe(150);
        for (const key of keys) expect((await ask(h.baseUrl, key)).status).toBe(401);
        const c1 = await commandCalls(probe);
        return { commands: difference(c1, c0), queries: keyQueries() - q0 };
      };
      const near = await work(nearMisses(h.key, 150));
      const random = await work(Array.from({ length: 150 }, () => generateApiKey('tg')));
      expect(near.queries).toBe(0);
      expect(random.queries).toBe(0);
      // The key sweeper and journal may add a few background commands; the refusals' own are the same.
      const lookups = (d: Record<string, number>) => ({ get: d.get ?? 0, exists: d.exists ?? 0 });
      expect(lookups(near.commands)).toEqual(lookups(random.commands));
      expect(lookups(near.commands)).toEqual({ get: 150, exists: 150 });
    } finally {
      await h.close();
    }
  }, 60_000);

  it('after Redis loses its data the directory is loaded again from the record once, and live keys work at once', async () => {
    const { h, keyQueries } = await gateway({ keyRefusalsPerMinute: 0 }, 0);
    try {
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      await h.settled();
      await h.journal?.flush();
      await probe.flushall();
      const before = keyQueries();
      // Unknown keys first: they load the directory (one page here), then are refused from it.
      for (let i = 0; i < 20; i++) expect((await ask(h.baseUrl, generateApiKey('tg'))).status).toBe(401);
      const afterUnknown = keyQueries() - before;
      expect(afterUnknown).toBe(1);
      // The real key: its pointer is back, and its key and its account's money are read again from the
      // record (the key by id, the account's key spend): a live key's own few queries, once.
      await new Promise((r) => setTimeout(r, 1_100)); // past the gateway's key-cache TTL
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      const afterReal = keyQueries() - before;
      expect(afterReal).toBeLessThanOrEqual(afterUnknown + 3);
      // And from then on unknown keys cost nothing again.
      for (let i = 0; i < 20; i++) expect((await ask(h.baseUrl, generateApiKey('tg'))).status).toBe(401);
      expect(keyQueries() - before).toBe(afterReal);
    } finally {
      await h.close();
    }
  }, 60_000);

  it('a key whose push to Redis is late is found through the budget', async () => {
    const { h, keyQueries } = await gateway({ keyRefusalsPerMinute: 0 }, 5);
    try {
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      await loadDirectory(h, keyQueries);
      const late = await h.backend.accounts.createKey(h.accountId, { name: 'late' });
      // As if its push had not landed (or a partial loss took it): the directory stays complete.
      const pointers = await probe.keys(`${h.redisNamespace}:keyhash:*`);
      expect(pointers.length).toBeGreaterThanOrEqual(2);
      for (const p of pointers) await probe.del(p);
      expect(await probe.exists(`${h.redisNamespace}:{key-directory}:complete`)).toBe(1);
      expect((await ask(h.baseUrl, late.secret)).status).toBe(200);
      // Found and pushed again: its pointer is back in Redis.
      expect((await probe.keys(`${h.redisNamespace}:keyhash:*`)).length).toBeGreaterThanOrEqual(1);
    } finally {
      await h.close();
    }
  }, 60_000);

  it('refusals per client address are throttled with a 429 in the caller’s format, and a key in use keeps working', async () => {
    // A key cache longer than the test, so the key in use stays known to the gateway throughout.
    const { h } = await gateway({ keyRefusalsPerMinute: 20, keyCacheTtlMs: 60_000 }, 0);
    try {
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
      for (let i = 0; i < 20; i++) expect((await ask(h.baseUrl, generateApiKey('tg'))).status).toBe(401);
      const before = await commandCalls(probe);
      const chat = await ask(h.baseUrl, generateApiKey('tg'));
      expect(chat.status).toBe(429);
      expect(Number(chat.headers.get('retry-after'))).toBeGreaterThan(0);
      const chatBody = (await chat.json()) as { error: { message: string; code: string } };
      expect(chatBody.error.code).toBe('too_many_invalid_keys');
      expect(chatBody.error.message).toMatch(/not recognised .* try again in \d+ s/);
      const messages = await ask(h.baseUrl, generateApiKey('tg'), '/v1/messages');
      expect(messages.status).toBe(429);
      const messagesBody = (await messages.json()) as { type: string; error: { type: string; message: string } };
      expect(messagesBody.type).toBe('error');
      expect(messagesBody.error.type).toBe('rate_limit_error');
      // Throttled refusals cost Redis nothing.
      const throttled = difference(await commandCalls(probe), before);
      expect(throttled.get ?? 0).toBe(0);
      // The key this address was using (known to the gateway) still goes through.
      expect((await ask(h.baseUrl, h.key)).status).toBe(200);
    } finally {
      await h.close();
    }
  }, 60_000);
});
