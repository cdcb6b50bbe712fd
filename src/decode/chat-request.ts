// Validates an OpenAI chat-completions request just enough to bill and route it. Every other field
// passes through unchanged. The worst case is measured on the upstream bodies built from it
// (reserve/upstream-bodies.ts), so no pass here measures the body's text.
import { invalidRequest } from './invalid-request.js';
import { isRecord, type JsonObject } from '../wire/json-shape.js';

export interface DecodedChatRequest {
  body: JsonObject;
  model: string;
  stream: boolean;
  /** The client asked for the usage chunk (stream_options.include_usage). */
  includeUsage: boolean;
  /** The client's output limit, when it gave one (see outputLimitField). */
  maxOutputTokens: number | undefined;
  hasImages: boolean;
  /**
   * The field that set `maxOutputTokens`; undefined when the client gave no limit. When a
   * client sends both, max_completion_tokens wins (max_tokens is its deprecated predecessor) and is
   * the only one forwarded: OpenAI refuses the pair, and compatible servers disagree on which wins.
   */
  outputLimitField: OutputLimitField | undefined;
}

export type OutputLimitField = 'max_completion_tokens' | 'max_tokens';

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

function positiveInt(body: JsonObject, field: string): number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw invalidRequest(`\`${field}\` must be a positive integer, got ${JSON.stringify(v)}.`, field, 'invalid_value');
  }
  return v;
}

interface Tally {
  images: number;
}

function tallyContent(content: unknown, path: string, role: string, tally: Tally): void {
  if (typeof content === 'string') return;
  if (content === null || content === undefined) {
    if (role === 'assistant') return;
    throw invalidRequest(`\`${path}\` is required for ${role} messages: a string or an array of content parts.`, path);
  }
  if (!Array.isArray(content)) {
    throw invalidRequest(`\`${path}\` must be a string or an array of content parts, got ${typeof content}.`, path);
  }
  content.forEach((part: unknown, i) => {
    const partPath = `${path}[${i}]`;
    if (!isRecord(part) || typeof part.type !== 'string') {
      throw invalidRequest(`\`${partPath}\` must be an object with a \`type\` (text, image_url, input_audio or file).`, partPath);
    }
    switch (part.type) {
      case 'text':
      case 'refusal': {
        const text = part.type === 'text' ? part.text : part.refusal;
        if (typeof text !== 'string') throw invalidRequest(`\`${partPath}.${part.type}\` must be a string.`, `${partPath}.${part.type}`);
        return;
      }
      case 'image_url': {
        const image = part.image_url;
        if (!isRecord(image) || typeof image.url !== 'string' || image.url === '') {
          throw invalidRequest(`\`${partPath}.image_url.url\` must be an http(s) or data: URL.`, `${partPath}.image_url.url`);
        }
        if (role !== 'user') throw invalidRequest(`\`${partPath}\`: images are only allowed in user messages.`, partPath);
        tally.images += 1;
        return;
      }
      default:
      // Audio, files and future part types: passed through as they are.
    }
  });
}

export function decodeChatRequest(raw: unknown): DecodedChatRequest {
  if (!isRecord(raw)) throw invalidRequest('The request body must be a JSON object with `model` and `messages`.');
  const body = raw;
  const model = body.model;
  if (typeof model !== 'string' || model === '') {
    throw invalidRequest('`model` is required: a model id from GET /v1/models.', 'model');
  }
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalidRequest('`messages` is required: a non-empty array of {role, content} objects.', 'messages');
  }
  const stream = body.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
    throw invalidRequest('`stream` must be a boolean.', 'stream');
  }
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null) {
    if (stream !== true) throw invalidRequest('`stream_options` is only allowed when `stream` is true.', 'stream_options');
    if (!isRecord(streamOptions)) throw invalidRequest('`stream_options` must be an object.', 'stream_options');
  }
  const n = body.n;
  if (n !== undefined && n !== null && n !== 1) {
    throw invalidRequest('`n` must be 1: Tollgate returns one choice per request (send several requests for several choices).', 'n', 'invalid_value');
  }
  const tally: Tally = { images: 0 };
  messages.forEach((message: unknown, i) => {
    const path = `messages[${i}]`;
    if (!isRecord(message)) throw invalidRequest(`\`${path}\` must be an object with \`role\` and \`content\`.`, path);
    const role = message.role;
    if (typeof role !== 'string' || !ROLES.has(role)) {
      throw invalidRequest(`\`${path}.role\` must be one of system, developer, user, assistant, tool; got ${JSON.stringify(role)}.`, `${path}.role`);
    }
    if (role === 'tool' && typeof message.tool_call_id !== 'string') {
      throw invalidRequest(`\`${path}.tool_call_id\` is required on tool messages: the id of the tool call this answers.`, `${path}.tool_call_id`);
    }
    const hasToolCalls = Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
    tallyContent(message.content, `${path}.content`, hasToolCalls || message.function_call ? 'assistant' : role, tally);
  });
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) throw invalidRequest('`tools` must be an array of tool definitions.', 'tools');
  const maxCompletion = positiveInt(body, 'max_completion_tokens');
  const maxTokens = positiveInt(body, 'max_tokens');
  return {
    body,
    model,
    stream: stream === true,
    includeUsage: isRecord(streamOptions) && streamOptions.include_usage === true,
    maxOutputTokens: maxCompletion ?? maxTokens,
    hasImages: tally.images > 0,
    outputLimitField: maxCompletion !== undefined ? 'max_completion_tokens' : maxTokens !== undefined ? 'max_tokens' : undefined,
  };
}

