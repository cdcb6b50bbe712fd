/**
 * Internal stream events -> OpenAI chat.completion.chunk SSE (docs/wire-formats.md A.6, C.9 O<-A).
 * Same id/created/model on every chunk, role chunk first, one finish chunk, a usage chunk
 * (`choices: []`) only when the client asked for include_usage, then `[DONE]`.
 */
import type { StreamEncoder, StreamEnd, StreamErrorKind, StreamEvent } from '../../representation/index.js';
import { finishToOpenAI } from './finish.js';
import { usageToOpenAI } from './usage.js';
import { withCost } from '../../wire/usage-cost.js';

export interface OpenAIStreamEncoderOptions {
  id: string;
  model: string;
  created: number;
  includeUsage: boolean;
}

const ERROR_TYPES: Record<StreamErrorKind, { type: string; code: string | null }> = {
  overloaded: { type: 'service_unavailable_error', code: 'server_is_overloaded' },
  api_error: { type: 'server_error', code: null },
  timeout: { type: 'server_error', code: 'timeout' },
};

export class OpenAIStreamEncoder implements StreamEncoder {
  private roleSent = false;
  /** Tool calls (by index) that have not received any argument text yet. */
  private readonly toolsWithoutArgs = new Set<number>();

  constructor(private readonly opts: OpenAIStreamEncoderOptions) {}

  encode(e: StreamEvent): string {
    switch (e.type) {
      case 'start':
        return this.role();
      case 'text':
        return this.role() + this.chunk({ content: e.text });
      case 'reasoning':
        // Both names: clients disagree on which one they read (A.5).
        return this.role() + this.chunk({ reasoning_content: e.text, reasoning: e.text });
      case 'tool_call_start':
        this.toolsWithoutArgs.add(e.index);
        return this.role() + this.chunk({
          tool_calls: [{ index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: '' } }],
        });
      case 'tool_call_args':
        if (e.fragment.trim() !== '') this.toolsWithoutArgs.delete(e.index);
        return this.role() + this.chunk({ tool_calls: [{ index: e.index, function: { arguments: e.fragment } }] });
      default:
        return '';
    }
  }

  close(end: StreamEnd): string {
    let out = this.role();
    // A no-argument call must still carry valid JSON; clients JSON.parse the concatenation.
    for (const index of this.toolsWithoutArgs) out += this.chunk({ tool_calls: [{ index, function: { arguments: '{}' } }] });
    this.toolsWithoutArgs.clear();
    out += this.chunk({}, finishToOpenAI(end.finish));
    if (this.opts.includeUsage) {
      out += this.data({ ...this.head(), choices: [], usage: withCost(usageToOpenAI(end.usage), end.costUsd) });
    }
    return `${out}data: [DONE]\n\n`;
  }

  fail(message: string, kind: StreamErrorKind): string {
    const { type, code } = ERROR_TYPES[kind];
    return this.data({ error: { message, type, param: null, code } });
  }

  private role(): string {
    if (this.roleSent) return '';
    this.roleSent = true;
    return this.chunk({ role: 'assistant', content: '' });
  }

  private head(): Record<string, unknown> {
    return { id: this.opts.id, object: 'chat.completion.chunk', created: this.opts.created, model: this.opts.model };
  }

  private chunk(delta: Record<string, unknown>, finishReason: string | null = null): string {
    return this.data({
      ...this.head(),
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(this.opts.includeUsage ? { usage: null } : {}),
    });
  }

  private data(payload: unknown): string {
    return `data: ${JSON.stringify(payload)}\n\n`;
  }
}
