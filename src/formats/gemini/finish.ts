// Gemini's finishReason -> the neutral finish reason. Every blocking reason is a content filter; a
// malformed or unexpected tool call ends the turn like a stop.
import type { FinishReason } from '../../representation/index.js';

const BLOCKED = new Set(['SAFETY', 'RECITATION', 'LANGUAGE', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY']);

export function finishFromGemini(reason: unknown): FinishReason | undefined {
  if (typeof reason !== 'string') return undefined;
  if (reason === 'MAX_TOKENS') return 'length';
  if (BLOCKED.has(reason)) return 'content_filter';
  return 'stop';
}
