// The simulator upstream: a plain node:http server (no framework, it must be an "instant" upstream for the
// benchmark) that speaks the OpenAI and Anthropic wire formats with honest token counts and injectable faults.
import type { ToolScript } from './reply.js';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleCountTokens, handleMessages } from './anthropic.js';
import { Exchange, errorBody, type Json, type SimFormat, type SimulatedRequest } from './exchange.js';
import { isRecord } from '../wire/json-shape.js';
import { FaultBook, parseFault, type FaultSpec } from './faults.js';
import { handleGenerateContent } from './gemini.js';
import { handleChatCompletions } from './openai.js';
import { PromptCache, type CacheReportScript } from './prompt-cache.js';

export type { SimulatedRequest } from './exchange.js';
export type { FaultSpec } from './faults.js';
export type { CacheReport, CacheReportScript } from './prompt-cache.js';

export interface SimulatorOptions {
  /** Port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number;
  /** Keep a request log in `requests` (default true; benchmarks turn it off). */
  log?: boolean;
  /** Delay before the first output token (default 0). */
  firstTokenDelayMs?: number;
  /** Delay between output tokens (default 0). */
  tokenDelayMs?: number;
  /** Reply length in tokens (default 24); a request may override it with `sim_reply_tokens`. */
  replyTokens?: number;
  /** Reasoning length in tokens when reasoning is emitted (default 16). */
  reasoningTokens?: number;
  /**
   * Upstream model names that reason; default: names containing "reason" or "think". A Set is read
   * live, so its owner can change it (the local run keeps it equal to the catalog's reasoning models).
   */
  reasoningModels?: Iterable<string>;
  /**
   * Anthropic-format requests: reasoning models think unless the request disables thinking, as some
   * Anthropic-compatible upstreams do (default: only when the request enables thinking, as Anthropic does).
   */
  anthropicThinksUnasked?: boolean;
  /**
   * A scripted agent turn (OpenAI-format requests): when a request declares this tool, the model calls
   * it with these arguments, and answers the tool's result by quoting it. For demos and client tests
   * (the local run takes it from SIM_TOOL_SCRIPT, JSON {"tool": ..., "arguments": {...}}).
   */
  toolScript?: ToolScript;
  /**
   * The model name replies report, by requested name (default: the requested name). Hosted APIs answer
   * an alias with the dated snapshot that served it, e.g. `gpt-4o` with `gpt-4o-2024-08-06`.
   */
  reportedModels?: Record<string, string>;
  /** Names listed by GET /v1/models (default ["sim-chat", "sim-reasoner"]). */
  models?: string[];
  /**
   * Emulate prompt caching (prompt-cache.ts): Anthropic `cache_control` breakpoints are written, then read;
   * OpenAI prompts with a `prompt_cache_key` read the prefix seen before. Off by default.
   */
  promptCache?: boolean;
  /** A test's cache report for each completion (the emulation's, or none, where it returns undefined). */
  cacheReport?: CacheReportScript;
  /** When set, requests must carry `Authorization: Bearer <apiKey>`, `x-api-key` or `x-goog-api-key: <apiKey>` (else 401). */
  apiKey?: string;
}

export interface Simulator {
  url: string;
  openaiBaseUrl: string;
  anthropicBaseUrl: string;
  /** Gemini API base URL (the bare origin, like Google's). */
  geminiBaseUrl: string;
  port: number;
  /** Log of API requests (not /_sim control calls), oldest first; empty when `log: false`. */
  readonly requests: SimulatedRequest[];
  clearLog(): void;
  injectFault(fault: FaultSpec): void;
  clearFaults(): void;
  /**
   * Resolves with the first logged request matching `pred`; re-checked when a request arrives and when
   * its response closes (so `r => r.finished` or `r => r.aborted` can be awaited).
   */
  waitForRequest(pred: (r: SimulatedRequest) => boolean, timeoutMs?: number): Promise<SimulatedRequest>;
  close(): Promise<void>;
}

const MAX_BODY = 32 * 1024 * 1024;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(undefined);
        req.removeAllListeners('data');
        req.resume();
      } else parts.push(c);
    });
    req.on('end', () => resolve(parts.length === 1 ? parts[0] : Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function formatOf(path: string, req: IncomingMessage): SimFormat {
  if (path.startsWith('/v1beta/')) return 'gemini';
  if (path.startsWith('/v1/messages')) return 'anthropic';
  if (path.startsWith('/v1/models') && (req.headers['x-api-key'] !== undefined || req.headers['anthropic-version'] !== undefined)) {
    return 'anthropic';
  }
  return 'openai';
}

function authorized(req: IncomingMessage, key: string): boolean {
  return req.headers.authorization === `Bearer ${key}` || req.headers['x-api-key'] === key || req.headers['x-goog-api-key'] === key;
}

export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const logEnabled = opts.log ?? true;
  const faults = new FaultBook();
  const requests: SimulatedRequest[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
  };
  const reasoningSet =
    opts.reasoningModels === undefined ? undefined : opts.reasoningModels instanceof Set ? (opts.reasoningModels as Set<string>) : new Set(opts.reasoningModels);
  const models = opts.models ?? ['sim-chat', 'sim-reasoner'];
  let seq = 0;
  let requestSeq = 0;
  const ctx = {
    replyTokens: opts.replyTokens ?? 24,
    reasoningTokens: opts.reasoningTokens ?? 16,
    isReasoningModel: (m: string) => (reasoningSet ? reasoningSet.has(m) : /reason|think/i.test(m)),
    replyModel: (m: string) => opts.reportedModels?.[m] ?? m,
    thinkingSecret: randomBytes(32),
    anthropicThinksUnasked: opts.anthropicThinksUnasked === true,
    ...(opts.toolScript === undefined ? {} : { toolScript: opts.toolScript }),
    promptCache: new PromptCache(opts.promptCache === true, opts.cacheReport),
    nextId: () => ++seq,
  };

  /** Prompt prefixes seen, for Gemini's implicit cache. */
  const seenGeminiPrompts = new Set<string>();
  const geminiModels = { models: models.map((id) => ({ name: `models/${id}`, displayName: id, supportedGenerationMethods: ['generateContent', 'streamGenerateContent'] })) };
  const listModels = (format: SimFormat) =>
    format === 'anthropic'
      ? {
          data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2026-01-01T00:00:00Z' })),
          has_more: false,
          first_id: models[0] ?? null,
          last_id: models[models.length - 1] ?? null,
        }
      : { object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1767225600, owned_by: 'tollgate-simulator' })) };

  function control(req: IncomingMessage, res: ServerResponse, path: string, raw: Buffer | undefined): void {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (path !== '/_sim/faults') return reply(404, errorBody('openai', 404, `no control route ${path}`));
    if (req.method === 'DELETE') {
      faults.clear();
      return reply(200, { faults: 0 });
    }
    if (req.method !== 'POST') return reply(405, errorBody('openai', 400, 'use POST or DELETE'));
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw?.toString('utf8') ?? '');
    } catch {
      return reply(400, errorBody('openai', 400, 'fault body is not valid JSON'));
    }
    const fault = parseFault(parsed);
    if (typeof fault === 'string') return reply(400, errorBody('openai', 400, fault));
    faults.add(fault);
    reply(200, { faults: faults.size });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const raw = req.method === 'POST' || req.method === 'DELETE' ? await readBody(req) : undefined;
    if (path.startsWith('/_sim/')) return control(req, res, path, raw);

    const format = formatOf(path, req);
    let body: unknown;
    let parseError: string | undefined;
    if (raw === undefined && req.method === 'POST') parseError = 'request body exceeds 32 MB';
    else if (raw !== undefined && raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        parseError = 'request body is not valid JSON';
      }
    }
    const json: Json = isRecord(body) ? body : {};
    // Gemini names the model, and whether it streams, in the path: /v1beta/models/{model}:{method}.
    const gemini = format === 'gemini' ? /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path) : null;
    const model = gemini ? decodeURIComponent(gemini[1]!) : typeof json.model === 'string' ? json.model : undefined;
    const fault = faults.take(path, model);
    const record: SimulatedRequest = {
      id: ++requestSeq,
      method: req.method ?? 'GET',
      path,
      query: q < 0 ? '' : url.slice(q + 1),
      headers: req.headers,
      body,
      model,
      stream: gemini ? gemini[2] === 'streamGenerateContent' : json.stream === true,
      status: 0,
      inputTokens: 0,
      cachedInputTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      outputTokensSent: 0,
      aborted: false,
      finished: false,
      stalled: false,
      fault,
      startedAt: Date.now(),
    };
    if (logEnabled) {
      requests.push(record);
      notify();
    }
    const ex = new Exchange(
      req,
      res,
      format,
      record,
      fault,
      fault?.firstTokenDelayMs ?? opts.firstTokenDelayMs ?? 0,
      fault?.tokenDelayMs ?? opts.tokenDelayMs ?? 0,
      logEnabled ? notify : () => undefined,
    );

    if (opts.apiKey !== undefined && !authorized(req, opts.apiKey)) return ex.error(401, 'invalid or missing API key');
    if (fault) {
      if (fault.delayMs) await sleep(fault.delayMs);
      if (fault.hang) return; // never answer; the 'close' listener records the client giving up
      if (fault.status !== undefined) return ex.error(fault.status, fault.message ?? `Simulated upstream error ${fault.status}`);
      if (fault.cutAfterChunks !== undefined && !record.stream) return ex.cut();
      if (ex.closed) return;
    }
    if (parseError) return ex.error(400, parseError);

    if (req.method === 'POST') {
      if (path === '/v1/chat/completions' || path === '/chat/completions') return handleChatCompletions(ex, json, ctx);
      if (path === '/v1/messages') return handleMessages(ex, json, ctx);
      if (path === '/v1/messages/count_tokens') return handleCountTokens(ex, json);
      if (gemini) return handleGenerateContent(ex, json, model ?? '', record.stream, ctx, seenGeminiPrompts);
    } else if (req.method === 'GET') {
      if (path === '/v1/models' || path === '/models') return ex.json(200, listModels(format));
      if (path === '/v1beta/models') return ex.json(200, geminiModels);
      const m = /^\/v1\/models\/(.+)$/.exec(path);
      if (m) {
        const one = listModels(format).data.find((x) => x.id === decodeURIComponent(m[1]!));
        return one ? ex.json(200, one) : ex.error(404, `model: ${m[1]} not found`);
      }
    }
    ex.error(404, `no route for ${req.method} ${path}`);
  }

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(errorBody('openai', 500, `simulator failure: ${String(err)}`)));
      } else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    openaiBaseUrl: `${url}/v1`,
    anthropicBaseUrl: url,
    geminiBaseUrl: url,
    port,
    requests,
    clearLog: () => {
      requests.length = 0;
    },
    injectFault: (f) => faults.add(f),
    clearFaults: () => faults.clear(),
    waitForRequest(pred, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = requests.find(pred);
          if (!hit) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(hit);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching simulator request within ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
