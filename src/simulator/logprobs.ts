// Token log-probabilities for chat completions that ask for them (`logprobs: true`, `top_logprobs: n`).
// Deterministic per token text, with the chosen token always the most likely, as a sampled reply's are.
import { fnv1a } from './reply.js';
import { WORDS } from './tokenizer.js';

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

const entry = (token: string, logprob: number): TopLogprob => ({ token, logprob, bytes: [...Buffer.from(token, 'utf8')] });

export function tokenLogprob(token: string, top: number): TokenLogprob {
  const h = fnv1a(token);
  const logprob = -((h % 997) + 1) / 10_000;
  const alternatives: TopLogprob[] = [];
  for (let i = 1; i < top; i++) alternatives.push(entry(WORDS[(h + i * 7919) % WORDS.length] as string, logprob - i * 1.25));
  return { ...entry(token, logprob), top_logprobs: top > 0 ? [entry(token, logprob), ...alternatives] : [] };
}
