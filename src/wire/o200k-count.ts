// The o200k token count itself, in whatever thread imports it: the gateway runs it in a worker thread
// (token-count.ts starts one on the first count), so the encoder's tables (~45 MB, about 100 ms to
// load) are neither in a gateway that never needs them nor loaded on its event loop. The o200k_base
// encoder comes from gpt-tokenizer: it holds the rank table in about a third of the memory of
// js-tiktoken (~45 MB RSS against ~145 MB, measured), which matters for a pod that holds thousands of
// open streams.
//
// No relative imports: a worker started from the sources (tests, `npm start`) runs this file with
// Node's own type stripping, which does not map our `.js` import specifiers to `.ts` files.
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type * as O200k from 'gpt-tokenizer/encoding/o200k_base';

type Encoding = typeof O200k;

/**
 * Text that spells a special token (`<|endoftext|>`) is counted as the ordinary text it is: a client
 * must not be able to make the count throw, which would leave a cut stream uncharged.
 */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };
/** Recently merged words the encoder keeps; its default (100,000) grows the heap for no gain here. */
const MERGE_CACHE_SIZE = 10_000;

let encoder: Promise<Encoding> | undefined;

/**
 * Text of several scripts, counted once at load: the first count of a kind of text runs the encoder's
 * cold code (measured: 16-25 ms for the first CJK piece, ~2 ms after), which would otherwise be a
 * stall of the first request to bring such text.
 */
const WARM_UP = [
  Array.from({ length: 128 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join(''),
  '😀🚀'.repeat(32),
  'Привет мир, '.repeat(10),
  'مرحبا بالعالم '.repeat(9),
  'a'.repeat(128),
  'The gateway reserves the worst case, then settles: 12,345 tokens at 0.30 USD.',
];

/** Loads o200k once (and warms it up); concurrent callers during the load share the same promise. */
export function loadEncoder(): Promise<Encoding> {
  encoder ??= import('gpt-tokenizer/encoding/o200k_base').then((enc) => {
    enc.setMergeCacheSize(MERGE_CACHE_SIZE);
    for (const text of WARM_UP) enc.countTokens(text, AS_PLAIN_TEXT);
    return enc;
  });
  return encoder;
}

/**
 * Why counting is cut into pieces: BPE merging is superlinear in the length of one pre-token (a run of
 * CJK characters or a single long "word" is one pre-token), so one call on a 300 KB word ran for 48 s
 * on the event loop and stalled every other client. Counting pieces of at most PIECE_CHARS code units
 * bounds the cost of each synchronous call (about 3 ms for the worst 128-unit piece measured, distinct
 * CJK characters, once the encoder is warm), so the total is linear in the text's length. Pieces are
 * cut just before a space where one is near, where o200k pre-tokens begin anyway (" word"), so
 * ordinary prose counts exactly as it would whole. Token counts here are estimates (the upstream's own
 * tokenizer decides what is billed), so a cut inside a long word, which may add a token, is harmless.
 */
export const PIECE_CHARS = 128;
/** How far back from a piece's end a clean cut is looked for. */
const SPACE_LOOKBACK = 48;
/** Counting yields to its event loop after this much work, so other counts in the same thread wait at most about this long. */
export const SLICE_MS = 4;
/**
 * Event-loop time one count may take in total. Past it the rest is bounded instead of counted: every
 * o200k token stands for at least one byte of UTF-8, so a text has at most as many tokens as bytes.
 */
export const COUNT_BUDGET_MS = 250;

export interface CountOptions {
  /** Total event-loop time the exact count may use (default COUNT_BUDGET_MS). */
  budgetMs?: number;
  /** Time source (tests). */
  now?: () => number;
}

const WORD_CHAR = /[\p{L}\p{N}\p{M}]/u;
const SPACE_CHAR = /\s/u;

/**
 * Whether o200k's pre-tokenizer always splits between text[i - 1] and text[i], so counting the two
 * sides apart gives the same tokens: before a space that follows a non-space (the space begins the next
 * pre-token, " word"), or before punctuation that follows a letter or digit (a word never takes
 * punctuation after it; the apostrophe is left out, for contractions like "it's").
 */
function isCleanCut(text: string, i: number): boolean {
  const before = text[i - 1] as string;
  const at = text[i] as string;
  if (at === ' ') return !SPACE_CHAR.test(before);
  return WORD_CHAR.test(before) && !WORD_CHAR.test(at) && !SPACE_CHAR.test(at) && at !== "'" && at !== '\u2019' && !isLowSurrogate(at.charCodeAt(0));
}

/**
 * The pieces of `text`, each at most PIECE_CHARS UTF-16 units, never split inside a surrogate pair,
 * and cut at a clean pre-token boundary (isCleanCut) when one lies in the last SPACE_LOOKBACK units.
 */
export function* pieces(text: string): Generator<string> {
  let start = 0;
  while (text.length - start > PIECE_CHARS) {
    const limit = start + PIECE_CHARS;
    let end = limit;
    for (let i = limit; i > limit - SPACE_LOOKBACK && i > start; i--) {
      if (isCleanCut(text, i)) {
        end = i;
        break;
      }
    }
    if (end === limit && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
    yield text.slice(start, end);
    start = end;
  }
  if (start < text.length) yield start === 0 ? text : text.slice(start);
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/** UTF-8 bytes of text[from..]: the linear upper bound on its tokens. */
function byteBound(text: string, from: number): number {
  return Buffer.byteLength(from === 0 ? text : text.slice(from), 'utf8');
}

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * o200k tokens of `texts`, counted in this thread: exact (piecewise) while the time budget lasts, then
 * the byte bound for the rest. Never holds this thread's event loop for more than about SLICE_MS plus
 * one piece. The gateway counts through `countTokens` (token-count.ts), which runs this in a worker.
 */
export async function countTokensHere(texts: readonly string[], opts: CountOptions = {}): Promise<number> {
  if (texts.length === 0) return 0;
  const enc = await loadEncoder();
  const now = opts.now ?? ((): number => performance.now());
  const budget = opts.budgetMs ?? COUNT_BUDGET_MS;
  let spent = 0;
  let sliceStart = now();
  let exhausted = false;
  let n = 0;
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i] as string;
    let offset = 0;
    if (exhausted) {
      // Bounding is cheap but not free: a stream of a million small deltas still yields now and then.
      if ((i & 4095) === 0 && now() - sliceStart >= SLICE_MS) {
        await yieldToLoop();
        sliceStart = now();
      }
    } else {
      for (const piece of pieces(text)) {
        const elapsed = now() - sliceStart;
        if (elapsed >= SLICE_MS) {
          spent += elapsed;
          if (spent >= budget) {
            exhausted = true;
            break;
          }
          await yieldToLoop();
          sliceStart = now();
        }
        n += enc.countTokens(piece, AS_PLAIN_TEXT);
        offset += piece.length;
      }
    }
    if (offset < text.length) n += byteBound(text, offset);
  }
  return n;
}

/**
 * What the counting worker is sent: a count's texts whole, or (for long texts, whose copy into a message
 * is work on the sender's thread) in parts, one message each, followed by the count naming how many
 * texts the parts made.
 */
export type CountMessage =
  | { kind: 'count'; id: number; texts: readonly string[]; budgetMs?: number }
  /** texts[j] continues the count's text number index + j. */
  | { kind: 'part'; id: number; index: number; texts: string[] }
  | { kind: 'count-parts'; id: number; texts: number; budgetMs?: number };
export type CountAnswer = { id: number; tokens: number } | { id: number; error: string };

/** workerData of the counting worker: tells this module to serve counts when it is the worker's entry. */
export const COUNT_WORKER = 'tollgate-o200k-count';

if (!isMainThread && workerData === COUNT_WORKER && parentPort !== null) {
  const port = parentPort;
  const partial = new Map<number, string[]>();
  port.on('message', (m: CountMessage) => {
    if (m.kind === 'part') {
      const texts = partial.get(m.id) ?? [];
      m.texts.forEach((text, j) => {
        texts[m.index + j] = (texts[m.index + j] ?? '') + text;
      });
      partial.set(m.id, texts);
      return;
    }
    let texts: readonly string[];
    if (m.kind === 'count') texts = m.texts;
    else {
      const parts = partial.get(m.id) ?? [];
      partial.delete(m.id);
      texts = Array.from({ length: m.texts }, (_, i) => parts[i] ?? '');
    }
    countTokensHere(texts, m.budgetMs === undefined ? {} : { budgetMs: m.budgetMs }).then(
      (tokens) => port.postMessage({ id: m.id, tokens } satisfies CountAnswer),
      (err: unknown) => port.postMessage({ id: m.id, error: String(err) } satisfies CountAnswer),
    );
  });
}
