// The worst-case cost of a request, reserved before the upstream call. It must be a TRUE upper bound,
// or a key could bill past its cap; it should not be needlessly loose, or small balances get refused.
//
// Why the input bound holds: every model we serve uses a byte-level BPE tokenizer, in which each token
// stands for at least one byte of UTF-8 input, so a text never tokenizes into more tokens than it has
// bytes. What the client sends is not all the model sees: the chat template wraps each message in
// role and separator tokens (a handful per message; 16 is above every template we know), the whole
// prompt gets begin/assistant-start tokens (16 again), and each image becomes vision tokens whose count
// follows from its decoded size by the bound its upstream format declares (UpstreamFormat.image): for
// Anthropic and OpenAI formats the largest of the families' formulas, never more than 1,600, and 1,600
// when its size cannot be read (image-tokens.ts); for Gemini its 768 px tiles of 258 tokens or Gemini 3's
// 1,120, uncapped, and an image of unreadable size refused (formats/gemini/image-billing.ts); a
// PDF an upstream bills by the page costs its pages at the format's tokens a page (the format's most pages
// when they cannot be read), and an upstream's own additions to the prompt (Anthropic's tool-use prompt)
// count too. Nothing can exceed the context window either: the upstream refuses longer prompts, so the
// bound is capped by it. That holds because what lets an upstream take more than the catalog's window
// (Anthropic's context-1m beta) is refused before anything is reserved (priced-features.ts); the catalog's
// contextWindow must be the upstream's own. Refusing instead whenever the byte bound passes the window
// would refuse real prompts of a third of the window (text runs 3-4 bytes a token).
//
// The bytes are those of the upstream request body itself, as sent (src/reserve/upstream-bodies.ts), less
// its image payloads: JSON text holds every string the upstream reads in at least as many bytes as the
// string has (escapes only add), so no field, known or new, is left out.
import type { CatalogModel, Micros } from '../catalog/snapshot.js';
import { ceilDiv, toMicros, TOKENS_PER_PRICE_UNIT } from '../billing/money.js';
import { MAX_IMAGE_TOKENS } from '../wire/image-tokens.js';

/** Chat-template tokens allowed per message (role markers, separators). */
export const TOKENS_PER_MESSAGE_ALLOWANCE = 16;
/** Vision tokens allowed per image not measured against its upstream's bound (a footprint without imageTokens). */
export const TOKENS_PER_IMAGE_ALLOWANCE = MAX_IMAGE_TOKENS;
/** Tokens allowed once per request (begin-of-text, assistant start). */
export const TOKENS_PER_REQUEST_ALLOWANCE = 16;

export interface RequestFootprint {
  /** UTF-8 bytes of the upstream body less its image payloads (or, before one is built, of the client's text). */
  textBytes: number;
  messages: number;
  images: number;
  /** Vision tokens of those images, each bounded from its decoded size (TOKENS_PER_IMAGE_ALLOWANCE each when not measured). */
  imageTokens?: number;
  /** Tokens billed beyond the body's text: PDFs' pages, the prompt an upstream adds (its tool-use prompt). */
  addedTokens?: number;
  /** The client's output limit; undefined = the model's default. */
  maxOutputTokens: number | undefined;
}

export interface WorstCase {
  amount: Micros;
  inputTokenBound: number;
  outputTokens: number;
}

function count(n: number, what: string): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative integer, got ${n}`);
  return n;
}

/** The highest price any output token can carry (reasoning tokens may be dearer than plain output). */
function maxOutputPrice(model: CatalogModel): bigint {
  const { output, reasoning } = model.pricing;
  return BigInt(Math.max(output, reasoning ?? 0));
}

/**
 * The highest price any input token can carry: a prompt may be written to a cache (dearer than plain input
 * at Anthropic: 1.25x for 5 minutes, 2x for an hour), and a cache-read price above the others (a mispriced
 * catalog) still bounds. Every price the catalog sets counts.
 */
export function maxInputPrice(model: CatalogModel): bigint {
  const { input, cacheRead, cacheWrite5m, cacheWrite1h } = model.pricing;
  return BigInt(Math.max(input, cacheRead ?? 0, cacheWrite5m ?? 0, cacheWrite1h ?? 0));
}

export function inputTokenBound(fp: RequestFootprint, model: CatalogModel): number {
  const raw =
    count(fp.textBytes, 'textBytes') +
    TOKENS_PER_MESSAGE_ALLOWANCE * count(fp.messages, 'messages') +
    (fp.imageTokens === undefined ? TOKENS_PER_IMAGE_ALLOWANCE * count(fp.images, 'images') : count(fp.imageTokens, 'imageTokens')) +
    count(fp.addedTokens ?? 0, 'addedTokens') +
    TOKENS_PER_REQUEST_ALLOWANCE;
  return Math.min(raw, model.contextWindow);
}

/** The output limit a reservation covers, and so the one every upstream is sent: the client's (or the model's default), capped by the context window. */
export function reservedOutputTokens(maxOutputTokens: number | undefined, model: CatalogModel): number {
  const requested = maxOutputTokens === undefined ? model.defaultMaxOutputTokens : count(maxOutputTokens, 'maxOutputTokens');
  return Math.min(requested, model.contextWindow);
}

export function worstCase(fp: RequestFootprint, model: CatalogModel): WorstCase {
  const inBound = inputTokenBound(fp, model);
  const outputTokens = reservedOutputTokens(fp.maxOutputTokens, model);
  const scaled = BigInt(inBound) * maxInputPrice(model) + BigInt(outputTokens) * maxOutputPrice(model);
  return { amount: toMicros(ceilDiv(scaled, TOKENS_PER_PRICE_UNIT)), inputTokenBound: inBound, outputTokens };
}

/**
 * The largest output limit whose worst case fits `available` (so the gateway can say "lower max_tokens to N"):
 * ceil((in·p_in + o·p_out)/1e6) <= A (p_in the highest input-side price)  <=>  in·p_in + o·p_out <= A·1e6 for integers. 0 when not even the input fits.
 */
export function largestAffordableMaxTokens(available: Micros, inputTokens: number, model: CatalogModel): number {
  const budget = BigInt(count(available, 'available')) * TOKENS_PER_PRICE_UNIT - BigInt(count(inputTokens, 'inputTokenBound')) * maxInputPrice(model);
  if (budget < 0n) return 0;
  const pOut = maxOutputPrice(model);
  if (pOut === 0n) return model.contextWindow;
  const tokens = budget / pOut;
  return tokens > BigInt(model.contextWindow) ? model.contextWindow : Number(tokens);
}
