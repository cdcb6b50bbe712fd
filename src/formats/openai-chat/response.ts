/** OpenAI chat.completion <-> internal response (docs/wire-formats.md A.4, A.5, C.5, C.6, C.8). */
import { arr, effectiveFinish, isRecord, parseArguments, randomId, str, TranslationError, type InternalResponse, type JsonObject } from '../../representation/index.js';
import type { ResponseEncodeContext } from '../types.js';
import { finishFromOpenAI, finishToOpenAI } from './finish.js';
import { usageFromOpenAI, usageToOpenAI } from './usage.js';

export function decodeOpenAIResponse(json: unknown): InternalResponse {
  const choice = isRecord(json) ? arr(json.choices)[0] : undefined;
  if (!isRecord(json) || !isRecord(choice) || !isRecord(choice.message)) {
    throw new TranslationError(502, 'Upstream returned a malformed chat completion (no choices).');
  }
  const m = choice.message;
  const content: InternalResponse['content'] = [];
  // Compat servers disagree on the field name (A.5): accept either.
  const reasoning = str(m.reasoning_content) ?? str(m.reasoning);
  if (reasoning) content.push({ type: 'thinking', text: reasoning });
  const text = typeof m.content === 'string'
    ? m.content
    : arr(m.content).flatMap((p) => (isRecord(p) && typeof p.text === 'string' ? [p.text] : [])).join('');
  if (text) content.push({ type: 'text', text });
  else if (typeof m.refusal === 'string' && m.refusal) content.push({ type: 'text', text: m.refusal });
  for (const tc of arr(m.tool_calls)) {
    if (!isRecord(tc)) continue;
    const fn = isRecord(tc.function) ? tc.function : {};
    content.push({ type: 'tool_call', id: str(tc.id) || randomId('call_'), name: str(fn.name) ?? '', input: parseArguments(fn.arguments) });
  }
  return {
    id: str(json.id) ?? randomId('chatcmpl-'),
    model: str(json.model) ?? '',
    content,
    finishReason: finishFromOpenAI(choice.finish_reason) ?? 'stop',
    stopSequence: null,
    usage: usageFromOpenAI(json.usage),
  };
}

export function openAICompletionId(upstreamId: string): string {
  return upstreamId.startsWith('chatcmpl-') ? upstreamId : `chatcmpl-${upstreamId}`;
}

export function encodeOpenAIResponse(r: InternalResponse, ctx: ResponseEncodeContext, created = Math.floor(Date.now() / 1000)): JsonObject {
  const text = r.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
  const thinking = r.content.flatMap((p) => (p.type === 'thinking' && !p.redacted ? [p] : []));
  const calls = r.content.flatMap((p) => (p.type === 'tool_call' ? [p] : []));
  const message: JsonObject = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text, refusal: null };
  if (calls.length > 0) {
    message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }));
  }
  if (thinking.length > 0) {
    const reasoning = thinking.map((t) => t.text).join('');
    // Both names: clients disagree on which one they read (A.5).
    message.reasoning_content = reasoning;
    message.reasoning = reasoning;
    // Signed blocks let an OpenAI client send the thinking back (LiteLLM convention, C.8).
    const signed = thinking.filter((t) => t.signature);
    if (signed.length > 0) message.thinking_blocks = signed.map((t) => ({ type: 'thinking', thinking: t.text, signature: t.signature }));
  }
  return {
    id: openAICompletionId(r.id),
    object: 'chat.completion',
    created,
    model: ctx.clientModel,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishToOpenAI(effectiveFinish(r.finishReason, calls.length > 0)) }],
    usage: usageToOpenAI(r.usage),
  };
}
