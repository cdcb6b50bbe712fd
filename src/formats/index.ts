// The wire formats Tollgate speaks, one table per role. A client format's name is what a route says
// it speaks; an upstream format's name is what the catalog says an upstream speaks. Adding a format is
// its folder plus its line here: the types below make the compiler list whatever it lacks.
import { anthropicMessagesClient, anthropicMessagesUpstream } from './anthropic-messages/index.js';
import { geminiUpstream } from './gemini/index.js';
import { openaiChatClient, openaiChatUpstream } from './openai-chat/index.js';
import type { ClientFormat, UpstreamFormat } from './types.js';

const CLIENT_FORMATS = {
  openai: openaiChatClient,
  anthropic: anthropicMessagesClient,
} as const satisfies Record<string, ClientFormat>;

const UPSTREAM_FORMATS = {
  openai: openaiChatUpstream,
  anthropic: anthropicMessagesUpstream,
  gemini: geminiUpstream,
} as const satisfies Record<string, UpstreamFormat>;

/** A format clients speak to the gateway (the Responses API is its own route, answered in OpenAI's errors). */
export type ClientFormatName = keyof typeof CLIENT_FORMATS;
/** A format an upstream speaks, as the catalog names it. */
export type UpstreamFormatName = keyof typeof UPSTREAM_FORMATS;

export const CLIENT_FORMAT_NAMES = Object.keys(CLIENT_FORMATS) as ClientFormatName[];
export const UPSTREAM_FORMAT_NAMES = Object.keys(UPSTREAM_FORMATS) as UpstreamFormatName[];

export function clientFormat(name: ClientFormatName): ClientFormat {
  return CLIENT_FORMATS[name];
}

export function upstreamFormat(name: UpstreamFormatName): UpstreamFormat {
  return UPSTREAM_FORMATS[name];
}

export { credentialHeaders, type ClientFormat, type ClientProtocolHeaders, type ErrorFields, type UpstreamFormat } from './types.js';
