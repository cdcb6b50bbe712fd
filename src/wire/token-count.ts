// Token counts for what the upstream did not report: the prompt of a stream cut before its usage
// arrived, the output relayed before a cut, the prompt an Anthropic client's translated stream opens
// with, and count_tokens. Counted off the event loop, in a worker thread started on the first count
// and ended after a minute without one: the o200k tables (~45 MB, ~100 ms to load, which once stalled
// the first such request for seconds) are held only while counts come, and never loaded where
// requests are served. The count itself is o200k-count.ts.
import { Worker } from 'node:worker_threads';
import { COUNT_WORKER, type CountAnswer, type CountMessage } from './o200k-count.js';

/** Chat-template tokens per message, the convention of OpenAI-compatible servers. */
export const TEMPLATE_TOKENS_PER_MESSAGE = 4;
/** Tokens an image is counted as when nothing better is known. */
export const TOKENS_PER_IMAGE = 85;
/** A worker with no count for this long is ended, and its memory with it. */
export const COUNT_WORKER_IDLE_MS = 60_000;
/**
 * Longer texts go to the worker in parts of this many characters, one per turn of the event loop:
 * copying a 10 MB cut-stream output into one message held the loop for ~10-30 ms.
 */
const PART_CHARS = 64 * 1024;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export interface CountOptions {
  /** Total time the exact count may use (default COUNT_BUDGET_MS of o200k-count.ts); past it the rest is bounded. */
  budgetMs?: number;
}

type Waiting = { resolve: (tokens: number) => void; reject: (err: Error) => void };

/** The counting worker: started when a count comes, ended when none has for COUNT_WORKER_IDLE_MS. */
export class CountWorker {
  private worker: Worker | undefined;
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 0;
  private idle: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs: number) {}

  /** Whether a worker (and the tables it loaded) is there now. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  count(texts: readonly string[], budgetMs: number | undefined): Promise<number> {
    const worker = this.started();
    const id = this.nextId++;
    clearTimeout(this.idle);
    const answer = new Promise<number>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    const budget = budgetMs === undefined ? {} : { budgetMs };
    let chars = 0;
    for (const t of texts) chars += t.length;
    if (chars <= PART_CHARS) this.send(worker, { kind: 'count', id, texts, ...budget });
    else void this.sendInParts(worker, id, texts, budget);
    return answer;
  }

  private send(worker: Worker, m: CountMessage): void {
    worker.postMessage(m);
  }

  /** The texts in messages of at most PART_CHARS characters (a long text split over several), one per turn of the loop. */
  private async sendInParts(worker: Worker, id: number, texts: readonly string[], budget: { budgetMs?: number }): Promise<void> {
    let batch: string[] = [];
    let first = 0;
    let size = 0;
    const flush = async (): Promise<boolean> => {
      // A worker lost meanwhile has failed this count already (see started()).
      if (this.worker !== worker) return false;
      if (batch.length > 0) this.send(worker, { kind: 'part', id, index: first, texts: batch });
      batch = [];
      size = 0;
      await yieldToLoop();
      return true;
    };
    for (let index = 0; index < texts.length; index++) {
      const text = texts[index] as string;
      let at = 0;
      do {
        const piece = text.slice(at, at + PART_CHARS - size);
        if (batch.length === 0) first = index;
        batch.push(piece);
        size += piece.length;
        at += piece.length;
        if (size >= PART_CHARS && !(await flush())) return;
      } while (at < text.length);
    }
    if ((await flush()) && this.worker === worker) this.send(worker, { kind: 'count-parts', id, texts: texts.length, ...budget });
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    // From the sources (tests, tsx) the module is a .ts file, which the worker runs with Node's type stripping.
    const file = import.meta.url.endsWith('.ts') ? './o200k-count.ts' : './o200k-count.js';
    // execArgv empty: a profiler or loader flag of the gateway's process is not the worker's.
    const worker = new Worker(new URL(file, import.meta.url), { workerData: COUNT_WORKER, execArgv: [] });
    worker.unref();
    worker.on('message', (answer: CountAnswer) => this.answered(answer));
    // A worker that fails or exits takes its pending counts with it; the next count starts another.
    const lost = (err: Error): void => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the token-count worker exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private answered(answer: CountAnswer): void {
    const w = this.waiting.get(answer.id);
    if (w === undefined) return;
    this.waiting.delete(answer.id);
    if ('error' in answer) w.reject(new Error(answer.error));
    else w.resolve(answer.tokens);
    if (this.waiting.size === 0) {
      this.idle = setTimeout(() => this.stop(), this.idleMs);
      this.idle.unref();
    }
  }

  private stop(): void {
    const worker = this.worker;
    if (worker === undefined || this.waiting.size > 0) return;
    this.worker = undefined;
    void worker.terminate();
  }
}

const counter = new CountWorker(COUNT_WORKER_IDLE_MS);

/**
 * o200k tokens of `texts`: exact (piecewise) while the time budget lasts, then the byte bound for the
 * rest (o200k-count.ts). Counted in the worker; the first count after an idle minute waits for it to
 * start and load its tables (about 0.1–0.2 s).
 */
export function countTokens(texts: readonly string[], opts: CountOptions = {}): Promise<number> {
  if (texts.every((t) => t === '')) return Promise.resolve(0);
  return counter.count(texts, opts.budgetMs);
}

/** The text pieces and counts of a prompt, gathered by a wire decoder. */
export interface PromptParts {
  texts: string[];
  messages: number;
  images: number;
  /** Those images' tokens when their sizes were read (else TOKENS_PER_IMAGE each). */
  imageTokens?: number;
}

export async function countPromptTokens(parts: PromptParts): Promise<number> {
  return (await countTokens(parts.texts)) + parts.messages * TEMPLATE_TOKENS_PER_MESSAGE + (parts.imageTokens ?? parts.images * TOKENS_PER_IMAGE);
}
