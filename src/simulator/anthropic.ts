// Anthropic Messages rendering (docs/wire-formats.md B.3, B.4): JSON message or named SSE events, signed thinking.
import { timingSafeEqual } from 'node:crypto';
import { MAX_SIM_REPLY_TOKENS, positiveInt, type Exchange, type Json, type SimContext } from './exchange.js';
import { isRecord } from '../wire/json-shape.js';
import { anthropicInputTokens } from './input-tokens.js';
import { planReply, signThinking, type Finish, type ReplyPlan, type ToolSpec } from './reply.js';
import { structuredReplyText } from './schema-value.js';

const STOP_REASON: Record<Finish, string> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' };

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (isRecord(b) && b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join('\n');
}

function callableTools(body: Json): { tools: ToolSpec[]; forced?: string; parallel: boolean } {
  const choice = isRecord(body.tool_choice) ? body.tool_choice : {};
  const parallel = choice.disable_parallel_tool_use !== true;
  if (!Array.isArray(body.tools) || choice.type === 'none') return { tools: [], parallel };
  const tools: ToolSpec[] = [];
  // Type-tagged server tools (web_search_..., bash_...) have no input_schema and are not ours to call.
  for (const t of body.tools) if (isRecord(t) && typeof t.name === 'string' && isRecord(t.input_schema)) tools.push({ name: t.name, schema: t.input_schema });
  const forced = choice.type === 'tool' && typeof choice.name === 'string' ? choice.name : undefined;
  return forced === undefined ? { tools, parallel } : { tools, forced, parallel };
}

/** Shared validation of model + messages; returns an error message or undefined. */
function invalid(body: Json): string | undefined {
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required';
  if (!Array.isArray(body.messages)) return 'messages: Field required';
  return undefined;
}

/** The first thinking block in history whose signature is not ours for its exact text, as an error path. */
function badSignature(messages: unknown[], secret: Buffer): string | undefined {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isRecord(m) || m.role !== 'assistant' || !Array.isArray(m.content)) continue;
    for (let j = 0; j < m.content.length; j++) {
      const b: unknown = m.content[j];
      if (!isRecord(b) || b.type !== 'thinking') continue;
      const want = Buffer.from(signThinking(secret, typeof b.thinking === 'string' ? b.thinking : ''));
      const got = Buffer.from(typeof b.signature === 'string' ? b.signature : '');
      if (got.length !== want.length || !timingSafeEqual(got, want)) return `messages.${i}.content.${j}`;
    }
  }
  return undefined;
}

export function handleCountTokens(ex: Exchange, body: Json): void {
  const err = invalid(body);
  if (err) return ex.error(400, err);
  const input_tokens = anthropicInputTokens(body);
  ex.record.inputTokens = input_tokens;
  ex.json(200, { input_tokens });
}

/** POST /v1/messages: validate, plan, render (errors answered in Anthropic shape). */
export async function handleMessages(ex: Exchange, body: Json, ctx: SimContext): Promise<void> {
  const err = invalid(body);
  if (err) return ex.error(400, err);
  const model = body.model as string;
  const messages = body.messages as unknown[];
  if (body.max_tokens === undefined) return ex.error(400, 'max_tokens: Field required');
  const cap = positiveInt(body, 'max_tokens');
  if (typeof cap === 'string') return ex.error(400, cap);
  const replyTokens = positiveInt(body, 'sim_reply_tokens', MAX_SIM_REPLY_TOKENS);
  if (typeof replyTokens === 'string') return ex.error(400, replyTokens);
  const bad = badSignature(messages, ctx.thinkingSecret);
  if (bad) return ex.error(400, `${bad}: Invalid \`signature\` in \`thinking\` block`);

  const inputTokens = anthropicInputTokens(body);
  ex.record.inputTokens = inputTokens;
  // Mid-conversation system messages (Claude Code) do not count as the turn being answered.
  const turns = messages.filter((m) => !(isRecord(m) && m.role === 'system'));
  const last: unknown = turns[turns.length - 1];
  const lastIsUser = isRecord(last) && last.role === 'user';
  const afterToolResult =
    lastIsUser && Array.isArray(last.content) && last.content.some((b) => isRecord(b) && b.type === 'tool_result');
  const { tools, forced, parallel } = lastIsUser && !afterToolResult ? callableTools(body) : { tools: [], forced: undefined, parallel: false };
  const thinking = isRecord(body.thinking) ? body.thinking.type : undefined;
  const structuredText = structuredReplyText(isRecord(body.output_config) ? body.output_config.format : undefined);
  const plan = planReply({
    lastUserText: lastIsUser ? textOf(last.content) : '',
    afterToolResult,
    tools,
    forcedTool: forced,
    allowParallel: parallel,
    reasoning: ctx.isReasoningModel(model) && (thinking === 'enabled' || thinking === 'adaptive' || (ctx.anthropicThinksUnasked === true && thinking !== 'disabled')),
    replyTokens: replyTokens ?? ctx.replyTokens,
    reasoningTokens: ctx.reasoningTokens,
    maxTokens: cap,
    ...(structuredText === undefined ? {} : { structuredText }),
    nextToolId: () => `toolu_sim${ctx.nextId()}`,
  });
  const id = `msg_sim${ctx.nextId()}`;
  const thinkingText = plan.reasoning.join('');
  const signature = plan.reasoning.length > 0 ? signThinking(ctx.thinkingSecret, thinkingText) : '';
  const cache = ctx.promptCache.anthropic(model, body, inputTokens);
  ex.record.cachedInputTokens = cache.read;
  ex.record.cacheWrite5mTokens = cache.write5m;
  ex.record.cacheWrite1hTokens = cache.write1h;
  // input_tokens are the prompt tokens neither read from nor written to the cache; the split of the
  // writes by lifetime is reported only when there are writes to split, so usage stays as it was without caching.
  const writes = cache.write5m + cache.write1h;
  const usage: Json = {
    input_tokens: inputTokens - cache.read - writes,
    output_tokens: plan.outputTokens,
    cache_creation_input_tokens: writes,
    cache_read_input_tokens: cache.read,
    ...(writes > 0 ? { cache_creation: { ephemeral_5m_input_tokens: cache.write5m, ephemeral_1h_input_tokens: cache.write1h } } : {}),
  };

  if (body.stream === true) return stream(ex, plan, id, ctx.replyModel(model), signature, usage);
  await ex.pause(ex.firstTokenDelayMs + ex.tokenDelayMs * Math.max(0, plan.outputTokens - 1));
  const content: Json[] = [];
  if (plan.reasoning.length > 0) content.push({ type: 'thinking', thinking: thinkingText, signature });
  if (plan.text.length > 0) content.push({ type: 'text', text: plan.text.join('') });
  for (const c of plan.toolCalls) content.push({ type: 'tool_use', id: c.id, name: c.name, input: JSON.parse(c.args) as unknown });
  const message = { id, type: 'message', role: 'assistant', model: ctx.replyModel(model), content, stop_reason: STOP_REASON[plan.finish], stop_sequence: null, usage };
  ex.json(200, message, plan.outputTokens);
}

const frame = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

async function stream(ex: Exchange, plan: ReplyPlan, id: string, model: string, signature: string, usage: Json): Promise<void> {
  await ex.startStream();
  const start = { ...usage, output_tokens: 1 };
  const message = { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: start };
  if (!ex.send(frame('message_start', { type: 'message_start', message }), 0)) return;
  if (!ex.send(frame('ping', { type: 'ping' }), 0)) return;
  await ex.pause(ex.firstTokenDelayMs);
  const paced = ex.pacedSender();
  let index = 0;
  const delta = (d: unknown) => frame('content_block_delta', { type: 'content_block_delta', index, delta: d });
  const open = (block: unknown) => ex.send(frame('content_block_start', { type: 'content_block_start', index, content_block: block }), 0);
  const close = () => ex.send(frame('content_block_stop', { type: 'content_block_stop', index: index++ }), 0);

  if (plan.reasoning.length > 0) {
    if (!open({ type: 'thinking', thinking: '', signature: '' })) return;
    for (const r of plan.reasoning) if (!(await paced(delta({ type: 'thinking_delta', thinking: r }), 1))) return;
    if (!ex.send(delta({ type: 'signature_delta', signature }), 0) || !close()) return;
  }
  if (plan.text.length > 0) {
    if (!open({ type: 'text', text: '' })) return;
    for (const t of plan.text) if (!(await paced(delta({ type: 'text_delta', text: t }), 1))) return;
    if (!close()) return;
  }
  for (const c of plan.toolCalls) {
    if (!open({ type: 'tool_use', id: c.id, name: c.name, input: {} })) return;
    ex.record.outputTokensSent += c.nameTokens;
    for (const p of c.argPieces) if (!(await paced(delta({ type: 'input_json_delta', partial_json: p.text }), p.tokens))) return;
    if (!close()) return;
  }
  const stop = { type: 'message_delta', delta: { stop_reason: STOP_REASON[plan.finish], stop_sequence: null }, usage };
  if (!ex.send(frame('message_delta', stop), 0)) return;
  if (!ex.send(frame('message_stop', { type: 'message_stop' }), 0)) return;
  ex.end();
}
