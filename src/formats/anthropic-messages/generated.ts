// What a message generated (text, thinking, tool input), for estimating usage an upstream did not
// report: the same-format relay and the translated pairs both read it here.
import { isRecord, type JsonObject } from '../../representation/index.js';
import type { GeneratedPieces } from '../types.js';

/** What a message's content generated (text, thinking, tool input), for estimating unreported usage. */
export function collectAnthropicContent(json: JsonObject, out: GeneratedPieces): void {
  const content = Array.isArray(json.content) ? json.content : [];
  for (const block of content) {
    if (!isRecord(block)) continue;
    if (typeof block.text === 'string') out.generated.push(block.text);
    if (typeof block.thinking === 'string') {
      out.generated.push(block.thinking);
      out.reasoningGenerated.push(block.thinking);
    }
    if (block.type === 'tool_use') out.generated.push(JSON.stringify(block.input ?? {}));
  }
}
