// A whole Gemini reply (GenerateContentResponse) -> the internal response. A prompt the upstream
// blocked comes back without candidates; that is a content filter, not an error.
import { effectiveFinish, isRecord, randomId, str, TranslationError, type InternalResponse } from '../../representation/index.js';
import { finishFromGemini } from './finish.js';
import { candidateParts, firstCandidate, replyPart, type ReplyPart } from './parts.js';
import { usageFromGemini } from './usage.js';

export function decodeGeminiResponse(json: unknown): InternalResponse {
  if (!isRecord(json)) throw new TranslationError(502, 'The upstream reply is not a JSON object.');
  const candidate = firstCandidate(json);
  const content: ReplyPart[] = [];
  for (const p of candidateParts(candidate)) {
    const part = replyPart(p);
    if (part !== undefined) content.push(part);
  }
  const blocked = candidate === undefined && isRecord(json.promptFeedback) && json.promptFeedback.blockReason !== undefined;
  const finish = blocked ? 'content_filter' : finishFromGemini(candidate?.finishReason);
  return {
    id: str(json.responseId) ?? randomId('gen_'),
    model: str(json.modelVersion) ?? '',
    content,
    finishReason: effectiveFinish(finish, content.some((p) => p.type === 'tool_call')),
    stopSequence: null,
    usage: usageFromGemini(json.usageMetadata),
  };
}
