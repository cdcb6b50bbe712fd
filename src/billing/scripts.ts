// The ledger's Lua scripts: read once at startup, run by EVALSHA, reloaded when Redis answers NOSCRIPT
// (after a restart or failover the script cache is empty).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

export type ScriptName = 'reserve' | 'settle' | 'reap' | 'credit' | 'refund' | 'audit';
const NAMES: readonly ScriptName[] = ['reserve', 'settle', 'reap', 'credit', 'refund', 'audit'];

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

function load(name: ScriptName): LoadedScript {
  const source = `${COMMON}\n${readLua(`${name}.lua`)}`;
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
  constructor(private readonly redis: Redis) {}

  /** Loads every script into the server's cache; EVALSHA then never misses in the common case. */
  async preload(): Promise<void> {
    await Promise.all(NAMES.map((n) => this.redis.script('LOAD', SCRIPTS[n].source)));
  }

  async run<T>(name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<T> {
    const script = SCRIPTS[name];
    try {
      return (await this.redis.evalsha(script.sha, keys.length, ...keys, ...args)) as T;
    } catch (err) {
      if (!isNoScript(err)) throw err;
      await this.redis.script('LOAD', script.source);
      return (await this.redis.evalsha(script.sha, keys.length, ...keys, ...args)) as T;
    }
  }
}
