// The prompt an Anthropic request is counted by (count_tokens, and a request whose upstream reported
// no usage), gathered from the body when a count asks for it rather than by the request's decoder.
import { describe, expect, it } from 'vitest';
import { anthropicPromptParts } from '../../src/wire/anthropic/prompt-parts.js';
import { TOKENS_PER_IMAGE } from '../../src/wire/token-count.js';

describe('anthropicPromptParts', () => {
  it('gathers every text the model reads: system, text, thinking, tool calls and results, text documents, tools', () => {
    const tool = { name: 'read', description: 'reads a file', input_schema: { type: 'object' } };
    const parts = anthropicPromptParts({
      model: 'm',
      max_tokens: 10,
      system: [{ type: 'text', text: 'be brief' }],
      tools: [tool],
      messages: [
        { role: 'user', content: 'hello' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hmm', signature: 's' },
            { type: 'tool_use', id: 't1', name: 'read', input: { path: 'a.ts' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'file body' }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc text' } },
            { type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'inner' }] } },
          ],
        },
      ],
    });
    expect(parts.texts).toEqual(['be brief', 'hello', 'hmm', 'read', '{"path":"a.ts"}', 'file body', 'doc text', 'inner', JSON.stringify(tool)]);
    expect(parts.messages).toBe(3);
    expect(parts.images).toBe(1);
    expect(parts.imageTokens).toBe(TOKENS_PER_IMAGE);
  });

  it('counts a tool call without input as an empty object, as the decoder did', () => {
    const parts = anthropicPromptParts({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'n' }] }] });
    expect(parts.texts).toEqual(['n', '{}']);
  });
});
