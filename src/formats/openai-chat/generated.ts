// What a chat completion (or one stream chunk's choice) generated, for estimating usage an upstream
// did not report: the same-format relay and the translated pairs both read it here.
import { isRecord } from '../../representation/index.js';
import type { GeneratedPieces } from '../types.js';

/** What a choice (delta or message) generated, for estimating unreported usage; true when anything. */
export function collectOpenAIChoice(choice: unknown, out: GeneratedPieces): boolean {
  if (!isRecord(choice)) return false;
  if (typeof choice.finish_reason === 'string') out.finishReason = choice.finish_reason;
  const delta = isRecord(choice.delta) ? choice.delta : isRecord(choice.message) ? choice.message : undefined;
  if (delta === undefined) return false;
  let produced = false;
  if (typeof delta.content === 'string' && delta.content !== '') {
    out.generated.push(delta.content);
    produced = true;
  }
  const reasoning = typeof delta.reasoning_content === 'string' ? delta.reasoning_content : delta.reasoning;
  if (typeof reasoning === 'string' && reasoning !== '') {
    out.generated.push(reasoning);
    out.reasoningGenerated.push(reasoning);
    produced = true;
  }
  if (Array.isArray(delta.tool_calls)) {
    for (const call of delta.tool_calls) {
      if (!isRecord(call) || !isRecord(call.function)) continue;
      const fn = call.function;
      if (typeof fn.name === 'string') out.generated.push(fn.name);
      if (typeof fn.arguments === 'string' && fn.arguments !== '') out.generated.push(fn.arguments);
      produced = true;
    }
  }
  return produced;
}
