// A Gemini candidate's parts as the internal representation's: text, thought text (reasoning), and
// function calls, whose ids Gemini may leave out (the client formats need one to answer them).
import { isRecord, randomId, str, type TextPart, type ThinkingPart, type ToolCallPart } from '../../representation/index.js';

export type ReplyPart = TextPart | ThinkingPart | ToolCallPart;

export function replyPart(part: unknown): ReplyPart | undefined {
  if (!isRecord(part)) return undefined;
  const text = str(part.text);
  if (text !== undefined) return part.thought === true ? { type: 'thinking', text } : { type: 'text', text };
  const call = part.functionCall;
  if (isRecord(call) && typeof call.name === 'string') {
    return { type: 'tool_call', id: str(call.id) ?? randomId('call_'), name: call.name, input: isRecord(call.args) ? call.args : {} };
  }
  return undefined;
}

/** The first candidate (n=1 is all a translated client receives), or undefined. */
export function firstCandidate(reply: unknown): Record<string, unknown> | undefined {
  if (!isRecord(reply) || !Array.isArray(reply.candidates)) return undefined;
  const c: unknown = reply.candidates[0];
  return isRecord(c) ? c : undefined;
}

export function candidateParts(candidate: Record<string, unknown> | undefined): unknown[] {
  const content = candidate?.content;
  return isRecord(content) && Array.isArray(content.parts) ? content.parts : [];
}
