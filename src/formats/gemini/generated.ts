// What a Gemini reply generated (answer, thoughts, function calls), for estimating usage it did not report.
import type { JsonObject } from '../../representation/index.js';
import type { GeneratedPieces } from '../types.js';
import { candidateParts, firstCandidate, replyPart } from './parts.js';

export function collectGeminiContent(reply: JsonObject, into: GeneratedPieces): void {
  for (const p of candidateParts(firstCandidate(reply))) {
    const part = replyPart(p);
    if (part === undefined) continue;
    if (part.type === 'tool_call') {
      into.generated.push(part.name, JSON.stringify(part.input));
    } else {
      into.generated.push(part.text);
      if (part.type === 'thinking') into.reasoningGenerated.push(part.text);
    }
  }
}
