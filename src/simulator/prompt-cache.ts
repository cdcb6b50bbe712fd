// Prompt caching as the upstreams report it, so the gateway's cache prices can be tested end to end.
// Off unless the simulator is started with `promptCache` (or a `cacheReport` script): the usage of
// every other test stays exactly what it was.
//
// - Anthropic: explicit breakpoints. Each block with `cache_control` (tools, then system, then messages,
//   in that order) ends a cacheable prefix. The longest prefix seen before is read from the cache; each
//   later breakpoint's new part is written, for 1 hour when its `cache_control.ttl` is "1h", else for 5
//   minutes. (No minimum prefix length, unlike the real API: tests stay small.)
// - OpenAI: automatic, when the request carries `prompt_cache_key`: the longest run of leading messages
//   a prompt under that key had before is read from the cache. OpenAI reports no writes.
// - Gemini's implicit cache is the Gemini handler's own (gemini.ts).
import { createHash } from 'node:crypto';
import { anthropicInputTokens, openaiInputTokens } from './input-tokens.js';
import { isRecord } from '../wire/json-shape.js';

// Its own names for a body and a format (exchange.ts holds the simulator's context, which holds this).
type Json = { [k: string]: unknown };
type SimFormat = 'openai' | 'anthropic' | 'gemini';

/** Prompt tokens by cache class; each a part of the prompt, apart from the others. */
export interface CacheReport {
  read: number;
  write5m: number;
  write1h: number;
}

/** A test's say over the report: given the request and its prompt tokens, the split to report (undefined: the emulation's). */
export type CacheReportScript = (request: { format: SimFormat; model: string; inputTokens: number; body: Json }) => CacheReport | undefined;

export const NO_CACHE: Readonly<CacheReport> = Object.freeze({ read: 0, write5m: 0, write1h: 0 });

const key = (model: string, prefix: unknown): string => createHash('sha256').update(JSON.stringify([model, prefix])).digest('hex');

interface Breakpoint {
  key: string;
  tokens: number;
  ttl: '5m' | '1h';
}

const ttlOf = (block: Json): '5m' | '1h' => (isRecord(block.cache_control) && block.cache_control.ttl === '1h' ? '1h' : '5m');
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Every breakpoint of an Anthropic body, in prompt order, with the tokens of the prefix it ends. */
function anthropicBreakpoints(model: string, body: Json): Breakpoint[] {
  const points: Breakpoint[] = [];
  const add = (block: unknown, prefix: Json): void => {
    if (isRecord(block) && isRecord(block.cache_control)) points.push({ key: key(model, prefix), tokens: anthropicInputTokens(prefix), ttl: ttlOf(block) });
  };
  const tools = list(body.tools);
  tools.forEach((t, i) => add(t, { tools: tools.slice(0, i + 1), messages: [] }));
  const system = list(body.system);
  system.forEach((b, i) => add(b, { tools, system: system.slice(0, i + 1), messages: [] }));
  const messages = list(body.messages);
  messages.forEach((m, i) => {
    if (!isRecord(m)) return;
    list(m.content).forEach((b, j) => add(b, { tools, system: body.system, messages: [...messages.slice(0, i), { ...m, content: list(m.content).slice(0, j + 1) }] }));
  });
  return points;
}

export class PromptCache {
  private readonly seen = new Set<string>();

  /** `emulate`: report what the emulation finds; else only a script's reports (and no caching at all without one). */
  constructor(
    private readonly emulate: boolean,
    private readonly script?: CacheReportScript,
  ) {}

  /** The split of an Anthropic request's `inputTokens` prompt tokens. */
  anthropic(model: string, body: Json, inputTokens: number): CacheReport {
    const scripted = this.script?.({ format: 'anthropic', model, inputTokens, body });
    if (scripted !== undefined) return scripted;
    if (!this.emulate) return NO_CACHE;
    const points = anthropicBreakpoints(model, body);
    let hit = -1;
    points.forEach((p, i) => {
      if (this.seen.has(p.key)) hit = i;
    });
    const report: CacheReport = { read: hit >= 0 ? (points[hit]?.tokens ?? 0) : 0, write5m: 0, write1h: 0 };
    let covered = report.read;
    for (const p of points.slice(hit + 1)) {
      const fresh = Math.max(0, p.tokens - covered);
      if (p.ttl === '1h') report.write1h += fresh;
      else report.write5m += fresh;
      covered = Math.max(covered, p.tokens);
    }
    for (const p of points) this.seen.add(p.key);
    return report;
  }

  /** The split of an OpenAI request's prompt (reads only: OpenAI charges no write and reports none). */
  openai(model: string, body: Json, inputTokens: number): CacheReport {
    const scripted = this.script?.({ format: 'openai', model, inputTokens, body });
    if (scripted !== undefined) return scripted;
    if (!this.emulate || typeof body.prompt_cache_key !== 'string') return NO_CACHE;
    const messages = list(body.messages);
    const cacheKey = (n: number): string => key(`${model}\0${body.prompt_cache_key}`, { tools: body.tools, messages: messages.slice(0, n) });
    // The longest run of leading messages (never the whole prompt) seen before under this key is read.
    let read = 0;
    for (let n = messages.length - 1; n >= 1; n--) {
      if (this.seen.has(cacheKey(n))) {
        read = openaiInputTokens({ tools: body.tools, messages: messages.slice(0, n) });
        break;
      }
    }
    // What a later prompt may read: each run of this one's leading messages.
    for (let n = 1; n <= messages.length; n++) this.seen.add(cacheKey(n));
    return { read: Math.min(read, inputTokens), write5m: 0, write1h: 0 };
  }

  /** A Gemini request's split from the script, if any (writes are not a Gemini class: dropped). */
  gemini(model: string, body: Json, inputTokens: number): CacheReport | undefined {
    const scripted = this.script?.({ format: 'gemini', model, inputTokens, body });
    return scripted === undefined ? undefined : { read: scripted.read, write5m: 0, write1h: 0 };
  }
}
