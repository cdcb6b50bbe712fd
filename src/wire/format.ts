/** The two wire formats Tollgate speaks, to clients and to upstreams alike. */
export type WireFormat = 'openai' | 'anthropic';

/** What a client may speak: the two formats above, or the OpenAI Responses API (never an upstream's). */
export type ClientFormat = WireFormat | 'responses';
