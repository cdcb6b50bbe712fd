// The ledger's Lua scripts: read once at startup, run by EVALSHA, sent whole by EVAL when Redis answers
// NOSCRIPT (after a restart or failover the script cache is empty). EVAL goes where the keys live, and
// caches the script there, so this also holds for the master of a cluster slot a SCRIPT LOAD missed.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { declaredBucketsLua } from './buckets.js';
import { primaries, type RedisClient } from './redis-client.js';

export type ScriptName = 'reserve' | 'settle' | 'settle-batch' | 'reap' | 'credit' | 'refund' | 'audit' | 'seed-begin' | 'seed' | 'catch-up' | 'adjust' | 'key' | 'stale' | 'account' | 'key-directory' | 'scope';
const NAMES: readonly ScriptName[] = ['reserve', 'settle', 'settle-batch', 'reap', 'credit', 'refund', 'audit', 'seed-begin', 'seed', 'catch-up', 'adjust', 'key', 'stale', 'account', 'key-directory', 'scope'];

interface LoadedScript {
  source: string;
  sha: string;
}

function readLua(file: string): string {
  // Beside this module when run from source (tsx); from the compiled tree (dist/src/billing) fall back
  // to the sources, in case the build did not copy the .lua files.
  let url = new URL(`./lua/${file}`, import.meta.url);
  if (!existsSync(url)) url = new URL(`../../../src/billing/lua/${file}`, import.meta.url);
  return readFileSync(url, 'utf8');
}

// Helpers shared by every script (s, num, usageCost); EVAL has no includes, so each source starts with them.
const COMMON = readLua('common.lua');
// What the scripts that walk a request's buckets share (their description, release and charge), after
// every declared limit's bucket (DECLARED), written from the declaration in buckets.ts.
const BUCKETS = `${declaredBucketsLua()}\n${readLua('buckets.lua')}`;
const WALK_BUCKETS: ReadonlySet<ScriptName> = new Set(['reserve', 'settle', 'settle-batch', 'reap']);

function load(name: ScriptName): LoadedScript {
  // The batch runs settle.lua's own body per settlement, so the two can never disagree.
  const body = name === 'settle-batch' ? `local function settle_one(KEYS, ARGV)\n${readLua('settle.lua')}\nend\n${readLua('settle-batch.lua')}` : readLua(`${name}.lua`);
  const source = WALK_BUCKETS.has(name) ? `${COMMON}\n${BUCKETS}\n${body}` : `${COMMON}\n${body}`;
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

// Read once per process; the files are part of the build.
const SCRIPTS: Record<ScriptName, LoadedScript> = Object.fromEntries(NAMES.map((n) => [n, load(n)])) as Record<
  ScriptName,
  LoadedScript
>;

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

export type ScriptArg = string | number;

export class ScriptRunner {
  constructor(private readonly redis: RedisClient) {}

  /**
   * Loads every script into the cache of every server that answers for keys (each master of a
   * cluster, as known now); EVALSHA then never misses in the common case.
   */
  async preload(): Promise<void> {
    // A cluster client knows its masters only once connected.
    if ('nodes' in this.redis && this.redis.status !== 'ready') await once(this.redis, 'ready');
    await Promise.all(primaries(this.redis).flatMap((server) => NAMES.map((n) => server.script('LOAD', SCRIPTS[n].source))));
  }

  async run<T>(name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<T> {
    const script = SCRIPTS[name];
    try {
      return (await this.redis.evalsha(script.sha, keys.length, ...keys, ...args)) as T;
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return (await this.redis.eval(script.source, keys.length, ...keys, ...args)) as T;
    }
  }
}
