// Token counts for what the upstream did not report: the prompt of a stream cut before its usage
// arrived, the output relayed before a cut, and count_tokens. o200k_base is loaded lazily, on the
// first cut stream or count request, so the common path never pays for the rank table.
import type { Tiktoken } from 'js-tiktoken/lite';

/** Chat-template tokens per message, the convention of OpenAI-compatible servers. */
export const TEMPLATE_TOKENS_PER_MESSAGE = 4;
/** Tokens an image is counted as when nothing better is known. */
export const TOKENS_PER_IMAGE = 85;

let encoder: Promise<Tiktoken> | undefined;

/** Loads o200k once; concurrent callers during the load share the same promise. */
export function loadEncoder(): Promise<Tiktoken> {
  encoder ??= Promise.all([import('js-tiktoken/lite'), import('js-tiktoken/ranks/o200k_base')]).then(
    ([{ Tiktoken: Encoder }, ranks]) => new Encoder(ranks.default),
  );
  return encoder;
}

export async function countTokens(texts: readonly string[]): Promise<number> {
  if (texts.length === 0) return 0;
  const enc = await loadEncoder();
  let n = 0;
  for (const t of texts) if (t !== '') n += enc.encode(t).length;
  return n;
}

/** The text pieces and counts of a prompt, gathered by a wire decoder. */
export interface PromptParts {
  texts: string[];
  messages: number;
  images: number;
}

export async function countPromptTokens(parts: PromptParts): Promise<number> {
  return (await countTokens(parts.texts)) + parts.messages * TEMPLATE_TOKENS_PER_MESSAGE + parts.images * TOKENS_PER_IMAGE;
}
