import { describe, expect, it } from 'vitest';
import { countPromptTokens, countTokens, loadEncoder, TEMPLATE_TOKENS_PER_MESSAGE } from '../../src/wire/token-count.js';

describe('token count', () => {
  it('counts o200k tokens of known text', async () => {
    // "hello world" is two o200k tokens; an empty piece adds nothing.
    expect(await countTokens(['hello world', ''])).toBe(2);
    expect(await countPromptTokens({ texts: ['hello world'], messages: 1, images: 0 })).toBe(2 + TEMPLATE_TOKENS_PER_MESSAGE);
  });

  it('counts text that spells a special token as plain text instead of throwing', async () => {
    // A prompt quoting <|endoftext|> must still be counted (and so charged) on a cut stream.
    await expect(countTokens(['before <|endoftext|> after'])).resolves.toBeGreaterThan(3);
    // As plain text it is several tokens, not the single special token id.
    expect(await countTokens(['<|endoftext|>'])).toBeGreaterThan(1);
  });

  it('loads the encoder once for concurrent callers', () => {
    expect(loadEncoder()).toBe(loadEncoder());
  });
});
