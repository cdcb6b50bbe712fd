/** The two wire formats Tollgate speaks, to clients and to upstreams alike. */
export type WireFormat = 'openai' | 'anthropic';
