// Gemini API rendering: POST /v1beta/models/{model}:generateContent (one GenerateContentResponse) and
// :streamGenerateContent?alt=sse (one GenerateContentResponse per `data:` event, no end marker; the
// last carries finishReason and the final usageMetadata). Thinking is counted apart from the answer.
// A prompt seen before is partly served from the implicit cache, as Gemini 2.5 models do, so the
// cached counter has something to report.
import { createHash } from 'node:crypto';
import { MAX_SIM_REPLY_TOKENS, type Exchange, type Json, type SimContext } from './exchange.js';
import { isRecord } from '../wire/json-shape.js';
import { geminiInputTokens } from './input-tokens.js';
import { planReply, type Finish, type ReplyPlan, type ToolSpec } from './reply.js';
import { structuredReplyText } from './schema-value.js';

const FINISH: Record<Finish, string> = { stop: 'STOP', length: 'MAX_TOKENS', tool_calls: 'STOP' };

function partsOf(content: unknown): Json[] {
  return isRecord(content) && Array.isArray(content.parts) ? content.parts.filter(isRecord) : [];
}

function textOf(parts: Json[]): string {
  return parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('\n');
}

function callableTools(body: Json): { tools: ToolSpec[]; forced?: string } {
  const config = isRecord(body.toolConfig) && isRecord(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {};
  if (!Array.isArray(body.tools) || config.mode === 'NONE') return { tools: [] };
  const tools: ToolSpec[] = [];
  for (const t of body.tools) {
    if (!isRecord(t) || !Array.isArray(t.functionDeclarations)) continue;
    for (const d of t.functionDeclarations) {
      if (isRecord(d) && typeof d.name === 'string') tools.push({ name: d.name, schema: d.parametersJsonSchema ?? d.parameters });
    }
  }
  const allowed = Array.isArray(config.allowedFunctionNames) ? config.allowedFunctionNames : [];
  const forced = config.mode === 'ANY' && typeof allowed[0] === 'string' ? allowed[0] : undefined;
  return forced === undefined ? { tools } : { tools, forced };
}

/** A positive integer, undefined when absent, or an error message. */
function positive(v: unknown, field: string, max = Number.MAX_SAFE_INTEGER): number | undefined | string {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) return `${field}: must be an integer from 1 to ${max}`;
  return v;
}

/** POST .../models/{model}:generateContent and :streamGenerateContent (errors answered in Gemini's shape). */
export async function handleGenerateContent(ex: Exchange, body: Json, model: string, stream: boolean, ctx: SimContext, seenPrompts: Set<string>): Promise<void> {
  if (!Array.isArray(body.contents) || body.contents.length === 0) return ex.error(400, '* GenerateContentRequest.contents: contents is not specified');
  const config = isRecord(body.generationConfig) ? body.generationConfig : {};
  const cap = positive(config.maxOutputTokens, 'generation_config.max_output_tokens');
  if (typeof cap === 'string') return ex.error(400, cap);
  const replyTokens = positive(body.sim_reply_tokens, 'sim_reply_tokens', MAX_SIM_REPLY_TOKENS);
  if (typeof replyTokens === 'string') return ex.error(400, replyTokens);

  const inputTokens = geminiInputTokens(body);
  ex.record.inputTokens = inputTokens;
  const contents = body.contents.filter(isRecord);
  const last = contents[contents.length - 1];
  const lastParts = partsOf(last);
  const toolResults = lastParts.filter((p) => isRecord(p.functionResponse));
  const afterToolResult = last?.role === 'user' && toolResults.length > 0;
  let lastUserText = '';
  for (let i = contents.length - 1; i >= 0; i--) {
    const text = contents[i]!.role === 'user' ? textOf(partsOf(contents[i])) : '';
    if (text !== '') {
      lastUserText = text;
      break;
    }
  }
  const { tools, forced } = last?.role === 'user' && !afterToolResult ? callableTools(body) : { tools: [], forced: undefined };
  const thinking = isRecord(config.thinkingConfig) ? config.thinkingConfig : undefined;
  const schema = config.responseJsonSchema ?? config.responseSchema;
  const structuredText = schema === undefined ? undefined : structuredReplyText({ type: 'json_schema', schema });
  const toolResultText = afterToolResult ? toolResults.map((p) => JSON.stringify((p.functionResponse as Json).response ?? {})).join('\n') : undefined;
  const plan = planReply({
    lastUserText,
    afterToolResult,
    tools,
    forcedTool: forced,
    allowParallel: true,
    reasoning: ctx.isReasoningModel(model) && thinking?.includeThoughts === true && thinking.thinkingBudget !== 0,
    replyTokens: replyTokens ?? ctx.replyTokens,
    reasoningTokens: ctx.reasoningTokens,
    maxTokens: cap,
    ...(structuredText === undefined ? {} : { structuredText }),
    ...(ctx.toolScript === undefined ? {} : { script: ctx.toolScript }),
    ...(toolResultText === undefined ? {} : { toolResultText }),
    nextToolId: () => `sim_call_${ctx.nextId()}`,
  });
  // Implicit caching: the same system instruction and first turn seen before serve half the prompt from cache.
  const prefix = createHash('sha256').update(JSON.stringify([model, body.systemInstruction ?? null, contents[0] ?? null])).digest('hex');
  const cached = ctx.promptCache.gemini(model, body, inputTokens)?.read ?? (seenPrompts.has(prefix) ? Math.floor(inputTokens / 2) : 0);
  seenPrompts.add(prefix);
  ex.record.cachedInputTokens = cached;
  const thoughts = plan.reasoning.length;
  const usage: Json = {
    promptTokenCount: inputTokens,
    candidatesTokenCount: plan.outputTokens - thoughts,
    totalTokenCount: inputTokens + plan.outputTokens,
    ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
    ...(cached > 0 ? { cachedContentTokenCount: cached } : {}),
  };
  const envelope = { responseId: `sim${ctx.nextId()}`, modelVersion: ctx.replyModel(model) };
  if (stream) return streamReply(ex, plan, envelope, usage);
  await ex.pause(ex.firstTokenDelayMs + ex.tokenDelayMs * Math.max(0, plan.outputTokens - 1));
  const parts: Json[] = [];
  if (thoughts > 0) parts.push({ text: plan.reasoning.join(''), thought: true });
  if (plan.text.length > 0) parts.push({ text: plan.text.join('') });
  for (const c of plan.toolCalls) parts.push({ functionCall: { id: c.id, name: c.name, args: JSON.parse(c.args) as unknown } });
  const candidate = { content: { role: 'model', parts }, finishReason: FINISH[plan.finish], index: 0 };
  ex.json(200, { candidates: [candidate], usageMetadata: usage, ...envelope }, plan.outputTokens);
}

async function streamReply(ex: Exchange, plan: ReplyPlan, envelope: Json, usage: Json): Promise<void> {
  const frame = (parts: Json[], end?: { finishReason: string; usage: Json }): string => {
    const candidate = { content: { role: 'model', parts }, index: 0, ...(end === undefined ? {} : { finishReason: end.finishReason }) };
    // Every chunk reports the prompt (its cached part too); the last one the whole usage.
    const prompt = { promptTokenCount: usage.promptTokenCount, totalTokenCount: usage.promptTokenCount };
    const usageMetadata = end?.usage ?? (usage.cachedContentTokenCount === undefined ? prompt : { ...prompt, cachedContentTokenCount: usage.cachedContentTokenCount });
    return `data: ${JSON.stringify({ candidates: [candidate], usageMetadata, ...envelope })}\r\n\r\n`;
  };
  await ex.startStream();
  await ex.pause(ex.firstTokenDelayMs);
  const paced = ex.pacedSender();
  for (const r of plan.reasoning) if (!(await paced(frame([{ text: r, thought: true }]), 1))) return;
  for (const t of plan.text) if (!(await paced(frame([{ text: t }]), 1))) return;
  // Function calls arrive whole, one part each.
  for (const c of plan.toolCalls) {
    if (!(await paced(frame([{ functionCall: { id: c.id, name: c.name, args: JSON.parse(c.args) as unknown } }]), c.tokens))) return;
  }
  if (!ex.send(frame([], { finishReason: FINISH[plan.finish], usage }), 0)) return;
  ex.end();
}
