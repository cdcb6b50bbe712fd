// OpenAI Chat Completions rendering (docs/wire-formats.md A.4, A.6): JSON or `data:`-only SSE ending in [DONE].
import { MAX_SIM_REPLY_TOKENS, positiveInt, type Exchange, type Json, type SimContext } from './exchange.js';
import { isRecord } from '../wire/json-shape.js';
import { openaiInputTokens } from './input-tokens.js';
import { tokenLogprob } from './logprobs.js';
import { planReply, type ReplyPlan, type ToolSpec } from './reply.js';
import { structuredReplyText } from './schema-value.js';

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (isRecord(p) && p.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('\n');
}

function callableTools(body: Json): { tools: ToolSpec[]; forced?: string } {
  if (!Array.isArray(body.tools) || body.tool_choice === 'none') return { tools: [] };
  const tools: ToolSpec[] = [];
  for (const t of body.tools) {
    if (isRecord(t) && t.type === 'function' && isRecord(t.function) && typeof t.function.name === 'string') {
      tools.push({ name: t.function.name, schema: t.function.parameters });
    }
  }
  const choice = body.tool_choice;
  const forced = isRecord(choice) && isRecord(choice.function) && typeof choice.function.name === 'string' ? choice.function.name : undefined;
  return forced === undefined ? { tools } : { tools, forced };
}

/** POST /v1/chat/completions: validate, plan, render (errors answered in OpenAI shape). */
export async function handleChatCompletions(ex: Exchange, body: Json, ctx: SimContext): Promise<void> {
  const model = body.model;
  if (typeof model !== 'string' || model === '') return ex.error(400, 'model: a model name is required');
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return ex.error(400, 'messages: a non-empty array is required');
  const cap = positiveInt(body, body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens');
  if (typeof cap === 'string') return ex.error(400, cap);
  const replyTokens = positiveInt(body, 'sim_reply_tokens', MAX_SIM_REPLY_TOKENS);
  if (typeof replyTokens === 'string') return ex.error(400, replyTokens);

  // top_logprobs: 0-20 and only with logprobs, as the real API checks.
  const wantLogprobs = body.logprobs === true;
  const top = body.top_logprobs;
  if (top !== undefined && top !== null) {
    if (typeof top !== 'number' || !Number.isInteger(top) || top < 0 || top > 20) return ex.error(400, 'top_logprobs: must be an integer from 0 to 20');
    if (!wantLogprobs) return ex.error(400, 'top_logprobs: logprobs must be set to true when top_logprobs is used');
  }
  const logprobsTop = wantLogprobs ? (typeof top === 'number' ? top : 0) : -1;
  const structuredText = structuredReplyText(body.response_format);

  const inputTokens = openaiInputTokens(body);
  ex.record.inputTokens = inputTokens;
  const last: unknown = messages[messages.length - 1];
  const lastRole = isRecord(last) ? last.role : undefined;
  let lastUserText = '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m: unknown = messages[i];
    if (isRecord(m) && m.role === 'user') {
      lastUserText = textOf(m.content);
      break;
    }
  }
  const { tools, forced } = lastRole === 'user' ? callableTools(body) : { tools: [], forced: undefined };
  const toolResultText = lastRole === 'tool' && isRecord(last) ? textOf(last.content) : undefined;
  const plan = planReply({
    lastUserText,
    afterToolResult: lastRole === 'tool',
    tools,
    forcedTool: forced,
    allowParallel: body.parallel_tool_calls !== false,
    reasoning: ctx.isReasoningModel(model) && body.reasoning_effort !== 'none',
    replyTokens: replyTokens ?? ctx.replyTokens,
    reasoningTokens: ctx.reasoningTokens,
    maxTokens: cap,
    ...(structuredText === undefined ? {} : { structuredText }),
    ...(ctx.toolScript === undefined ? {} : { script: ctx.toolScript }),
    ...(toolResultText === undefined ? {} : { toolResultText }),
    nextToolId: () => `call_${ctx.nextId()}`,
  });
  const id = `chatcmpl-sim${ctx.nextId()}`;
  const created = Math.floor(Date.now() / 1000);
  const cache = ctx.promptCache.openai(model, body, inputTokens);
  const writes = cache.write5m + cache.write1h;
  ex.record.cachedInputTokens = cache.read;
  ex.record.cacheWrite5mTokens = cache.write5m;
  ex.record.cacheWrite1hTokens = cache.write1h;
  const usage = {
    prompt_tokens: inputTokens,
    completion_tokens: plan.outputTokens,
    total_tokens: inputTokens + plan.outputTokens,
    // Reads as OpenAI reports them; writes (only a script reports any) as OpenRouter-style upstreams do.
    prompt_tokens_details: {
      cached_tokens: cache.read,
      ...(writes > 0 ? { cache_write_tokens: writes, cache_creation: { ephemeral_5m_input_tokens: cache.write5m, ephemeral_1h_input_tokens: cache.write1h } } : {}),
    },
    completion_tokens_details: { reasoning_tokens: plan.reasoning.length },
  };

  if (body.stream === true) {
    const opts = body.stream_options;
    return stream(ex, plan, id, created, ctx.replyModel(model), isRecord(opts) && opts.include_usage === true ? usage : undefined, logprobsTop);
  }
  await ex.pause(ex.firstTokenDelayMs + ex.tokenDelayMs * Math.max(0, plan.outputTokens - 1));
  const message: Json = { role: 'assistant', content: plan.toolCalls.length > 0 ? null : plan.text.join(''), refusal: null };
  if (plan.reasoning.length > 0) message.reasoning_content = message.reasoning = plan.reasoning.join('');
  if (plan.toolCalls.length > 0) {
    message.tool_calls = plan.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));
  }
  const response = {
    id,
    object: 'chat.completion',
    created,
    model: ctx.replyModel(model),
    choices: [{ index: 0, message, logprobs: logprobsTop < 0 ? null : { content: plan.text.map((t) => tokenLogprob(t, logprobsTop)), refusal: null }, finish_reason: plan.finish }],
    usage,
    system_fingerprint: 'fp_sim',
  };
  ex.json(200, response, plan.outputTokens);
}

async function stream(ex: Exchange, plan: ReplyPlan, id: string, created: number, model: string, usage: Json | undefined, logprobsTop: number): Promise<void> {
  // Every chunk shares id/created/model; only the delta varies, so the envelope is serialised once.
  const head = `data: {"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"system_fingerprint":"fp_sim","choices":[{"index":0,"delta":`;
  const usageNull = usage ? ',"usage":null' : '';
  const tail = `,"logprobs":null,"finish_reason":null}]${usageNull}}\n\n`;
  const chunk = (delta: unknown) => head + JSON.stringify(delta) + tail;
  // A content chunk carries its token's logprobs when they were asked for.
  const contentChunk = (t: string) =>
    logprobsTop < 0
      ? chunk({ content: t })
      : `${head}${JSON.stringify({ content: t })},"logprobs":${JSON.stringify({ content: [tokenLogprob(t, logprobsTop)], refusal: null })},"finish_reason":null}]${usageNull}}\n\n`;

  await ex.startStream();
  if (!ex.send(chunk({ role: 'assistant', content: '' }), 0)) return;
  await ex.pause(ex.firstTokenDelayMs);
  const paced = ex.pacedSender();
  for (const r of plan.reasoning) if (!(await paced(chunk({ reasoning_content: r, reasoning: r }), 1))) return;
  for (const t of plan.text) if (!(await paced(contentChunk(t), 1))) return;
  for (let i = 0; i < plan.toolCalls.length; i++) {
    const c = plan.toolCalls[i]!;
    const open = { tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] };
    if (!(await paced(chunk(open), c.nameTokens))) return;
    for (const p of c.argPieces) {
      if (!(await paced(chunk({ tool_calls: [{ index: i, function: { arguments: p.text } }] }), p.tokens))) return;
    }
  }
  if (!ex.send(`${head}{},"logprobs":null,"finish_reason":"${plan.finish}"}]${usageNull}}\n\n`, 0)) return;
  if (usage) {
    const frame = `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_sim', choices: [], usage })}\n\n`;
    if (!ex.send(frame, 0)) return;
  }
  if (!ex.send('data: [DONE]\n\n', 0)) return;
  ex.end();
}
