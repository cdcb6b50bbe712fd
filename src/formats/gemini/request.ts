// The internal request -> a Gemini GenerateContentRequest. The model and whether it streams are in the
// URL, not the body. Gemini has two roles (user, model), a separate systemInstruction, and answers a
// function call by its name, so each tool result is matched to the call it answers.
import { TranslationError, type ContentPart, type InternalRequest, type JsonObject, type ReasoningEffort, type ToolChoice } from '../../representation/index.js';

export interface GeminiEncodeOptions {
  supportsReasoning: boolean;
  /** Output cap when the client sent none. */
  defaultMaxOutputTokens: number;
}

/** Thinking budgets for a requested effort (the same steps the Anthropic encoder uses). */
const EFFORT_BUDGET: Record<ReasoningEffort, number> = {
  none: 0, minimal: 1024, low: 2048, medium: 8192, high: 16384, xhigh: 32000, max: 64000,
};

const MODES: Record<Exclude<ToolChoice['type'], 'tool'>, string> = { auto: 'AUTO', any: 'ANY', none: 'NONE' };

export function encodeGeminiRequest(req: InternalRequest, opts: GeminiEncodeOptions): JsonObject {
  if (req.choices !== undefined && req.choices > 1) {
    throw new TranslationError(400, 'n: this model returns one choice per request; send n=1 or omit n', 'n');
  }
  const out: JsonObject = {};
  if (req.system.length > 0) out.systemInstruction = { parts: req.system.map((text) => ({ text })) };
  out.contents = encodeContents(req);
  if (req.tools.length > 0) {
    out.tools = [
      {
        functionDeclarations: req.tools.map((t) => ({
          name: t.name,
          ...(t.description !== undefined ? { description: t.description } : {}),
          // Full JSON Schema (`parameters` takes only an OpenAPI subset).
          parametersJsonSchema: t.parameters,
        })),
      },
    ];
    if (req.toolChoice !== undefined) {
      const choice = req.toolChoice;
      out.toolConfig = {
        functionCallingConfig: choice.type === 'tool' ? { mode: 'ANY', allowedFunctionNames: [choice.name] } : { mode: MODES[choice.type] },
      };
    }
  }
  const config: JsonObject = { maxOutputTokens: req.maxOutputTokens ?? opts.defaultMaxOutputTokens };
  if (req.temperature !== undefined) config.temperature = req.temperature;
  if (req.topP !== undefined) config.topP = req.topP;
  if (req.stop.length > 0) config.stopSequences = req.stop;
  if (req.responseFormat) {
    config.responseMimeType = 'application/json';
    config.responseJsonSchema = req.responseFormat.schema;
  }
  const thinking = encodeThinking(req, opts);
  if (thinking !== undefined) config.thinkingConfig = thinking;
  out.generationConfig = config;
  return out;
}

function encodeThinking(req: InternalRequest, opts: GeminiEncodeOptions): JsonObject | undefined {
  const r = req.reasoning;
  if (!r || !opts.supportsReasoning) return undefined;
  if (r.mode === 'disabled' || r.effort === 'none') return { thinkingBudget: 0 };
  return { thinkingBudget: r.budgetTokens ?? EFFORT_BUDGET[r.effort ?? 'medium'], includeThoughts: true };
}

/** Messages as Gemini contents; system messages between turns are given as user text. */
function encodeContents(req: InternalRequest): JsonObject[] {
  const callNames = new Map<string, string>();
  const contents: JsonObject[] = [];
  req.messages.forEach((m, i) => {
    const parts: JsonObject[] = [];
    m.content.forEach((part, j) => encodePart(part, `messages.${i}.content.${j}`, callNames, parts));
    if (parts.length > 0) contents.push({ role: m.role === 'assistant' ? 'model' : 'user', parts });
  });
  return contents;
}

function encodePart(part: ContentPart, where: string, callNames: Map<string, string>, parts: JsonObject[]): void {
  switch (part.type) {
    case 'text':
      parts.push({ text: part.text });
      return;
    case 'image':
      if (part.source.kind === 'url') {
        throw new TranslationError(400, `${where}: this model's upstream takes images as data, not URLs; send the image as a base64 data URL`, 'messages');
      }
      parts.push({ inlineData: { mimeType: part.source.mediaType, data: part.source.data } });
      return;
    case 'document':
      parts.push(part.source.kind === 'text' ? { text: part.source.text } : { inlineData: { mimeType: part.source.mediaType, data: part.source.data } });
      return;
    case 'tool_call':
      callNames.set(part.id, part.name);
      parts.push({ functionCall: { name: part.name, args: part.input } });
      return;
    case 'tool_result': {
      const name = callNames.get(part.toolCallId);
      if (name === undefined) {
        throw new TranslationError(400, `${where}: the tool result for '${part.toolCallId}' answers no tool call earlier in the conversation`, 'messages');
      }
      const text = part.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');
      parts.push({ functionResponse: { name, response: part.isError ? { error: text } : { content: text } } });
      // Images a tool returned follow its response as parts of the same turn.
      for (const c of part.content) if (c.type === 'image') encodePart(c, where, callNames, parts);
      return;
    }
    case 'thinking':
      // Thoughts cannot be handed back to Gemini without its own signature: dropped, like any reasoning
      // an upstream of another family produced.
      return;
  }
}
