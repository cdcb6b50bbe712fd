// One o200k_base encoder for the whole process (gpt-tokenizer's module, the same one the gateway's
// token counter loads, so a process running both holds one rank table); built at import, never per request.
import * as encoder from 'gpt-tokenizer/encoding/o200k_base';

// Prompts may contain text spelling a special token; it is counted as plain text, never an error.
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

export function countTokens(text: string): number {
  return text.length === 0 ? 0 : encoder.countTokens(text, AS_PLAIN_TEXT);
}

export function encode(text: string): number[] {
  return encoder.encode(text, AS_PLAIN_TEXT);
}

export function decode(tokens: number[]): string {
  return encoder.decode(tokens);
}

/** Splits text into pieces of exactly one token each (ASCII text only decodes cleanly token by token). */
export function tokenPieces(text: string): string[] {
  return encoder.encode(text, AS_PLAIN_TEXT).map((t) => encoder.decode([t]));
}

/**
 * Reply vocabulary. Each entry, with its leading space, is exactly one o200k_base token, and the
 * pre-tokenizer splits before every space, so a reply made of these words re-tokenizes to exactly
 * one token per word (a test checks both facts).
 */
export const WORDS: readonly string[] = (
  'the quick brown fox jumps over lazy dog and a of to in is it that for on with as was at by from ' +
  'this be or are an have not but all can will one more time about when some out up into just like new ' +
  'other could than then first also after well way many these two any may only very most such river ' +
  'stone light water'
)
  .split(' ')
  .map((w) => ' ' + w);
