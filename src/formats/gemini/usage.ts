// Gemini's usage (usageMetadata): promptTokenCount includes the cached part (cachedContentTokenCount, a
// cache read; Gemini bills cache storage by the hour, not per request, so there is no write class),
// and thinking is counted apart from the answer (thoughtsTokenCount is not in candidatesTokenCount) but
// billed as output. A stream repeats the counts so far on its chunks: each report replaces the last.
import { isRecord, tokenCount, type NormalizedUsage } from '../../representation/index.js';

export function usageFromGemini(u: unknown): NormalizedUsage {
  if (!isRecord(u)) return { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0, unbillable: true, promptUnbillable: true };
  const prompt = tokenCount(u.promptTokenCount);
  const candidates = tokenCount(u.candidatesTokenCount);
  const thoughts = tokenCount(u.thoughtsTokenCount);
  const cached = tokenCount(u.cachedContentTokenCount);
  // A counter that is present but not a count cannot be billed by; an absent thinking or cache count is
  // zero (proto3 JSON leaves zeros out), an absent prompt or answer count is not.
  const invalid = (['thoughtsTokenCount', 'cachedContentTokenCount'] as const).some((k) => u[k] !== undefined && tokenCount(u[k]) === undefined);
  const promptInvalid = prompt === undefined || (u.cachedContentTokenCount !== undefined && cached === undefined);
  return {
    input: prompt ?? 0,
    cacheRead: cached ?? 0,
    cacheWrite5m: 0,
    cacheWrite1h: 0,
    output: (candidates ?? 0) + (thoughts ?? 0),
    reasoning: thoughts ?? 0,
    ...(prompt === undefined || candidates === undefined || invalid ? { unbillable: true as const } : {}),
    ...(promptInvalid ? { promptUnbillable: true as const } : {}),
  };
}
