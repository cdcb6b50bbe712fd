/** Anthropic non-stream message <-> internal response (docs/wire-formats.md B.3, C.5, C.6, C.8). */
import { effectiveFinish, isRecord, randomId, str, TranslationError, type InternalResponse, type JsonObject } from '../../representation/index.js';
import type { ResponseEncodeContext } from '../types.js';
import { finishFromAnthropic, finishToAnthropic } from './finish.js';
import { gatewaySignature } from './thinking-signature.js';
import { usageFromAnthropic, usageToAnthropic } from './usage.js';

export function decodeAnthropicResponse(json: unknown): InternalResponse {
  if (!isRecord(json) || !Array.isArray(json.content)) {
    throw new TranslationError(502, 'Upstream returned a malformed message (no content array).');
  }
  const content: InternalResponse['content'] = [];
  for (const b of json.content) {
    if (!isRecord(b)) continue;
    if (b.type === 'text' && typeof b.text === 'string') content.push({ type: 'text', text: b.text });
    else if (b.type === 'thinking') {
      const sig = str(b.signature);
      content.push({ type: 'thinking', text: str(b.thinking) ?? '', ...(sig ? { signature: sig } : {}) });
    } else if (b.type === 'redacted_thinking') content.push({ type: 'thinking', text: str(b.data) ?? '', redacted: true });
    else if (b.type === 'tool_use') {
      content.push({ type: 'tool_call', id: str(b.id) ?? randomId('toolu_'), name: str(b.name) ?? '', input: isRecord(b.input) ? b.input : {} });
    }
  }
  return {
    id: str(json.id) ?? randomId('msg_'),
    model: str(json.model) ?? '',
    content,
    finishReason: finishFromAnthropic(json.stop_reason) ?? 'stop',
    stopSequence: str(json.stop_sequence) ?? null,
    usage: usageFromAnthropic(json.usage),
  };
}


export function anthropicMessageId(upstreamId: string): string {
  return upstreamId.startsWith('msg_') ? upstreamId : `msg_${upstreamId.replace(/[^a-zA-Z0-9_-]/g, '')}`;
}

export function encodeAnthropicResponse(r: InternalResponse, ctx: ResponseEncodeContext): JsonObject {
  const toolCalled = r.content.some((p) => p.type === 'tool_call');
  // Thinking must come first in an Anthropic message.
  const ordered = [...r.content.filter((p) => p.type === 'thinking'), ...r.content.filter((p) => p.type !== 'thinking')];
  const content = ordered.map((p): JsonObject => {
    switch (p.type) {
      case 'thinking':
        return p.redacted
          ? { type: 'redacted_thinking', data: p.text }
          : { type: 'thinking', thinking: p.text, signature: p.signature ?? gatewaySignature(ctx.requestId) };
      case 'text':
        return { type: 'text', text: p.text };
      case 'tool_call':
        return { type: 'tool_use', id: p.id, name: p.name, input: p.input };
    }
  });
  const finish = effectiveFinish(r.finishReason, toolCalled);
  return {
    id: anthropicMessageId(r.id),
    type: 'message',
    role: 'assistant',
    model: ctx.clientModel,
    content,
    stop_reason: finishToAnthropic(finish),
    stop_sequence: finish === 'stop_sequence' ? r.stopSequence : null,
    usage: usageToAnthropic(r.usage),
  };
}
