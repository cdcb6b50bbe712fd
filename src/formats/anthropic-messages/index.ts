// Anthropic messages, as a client format and as an upstream format. What other folders may use.
export { anthropicMessagesClient } from './client.js';
export { ANTHROPIC_VERSION, anthropicMessagesUpstream } from './upstream.js';
export { collectAnthropicContent } from './generated.js';
export { stripGatewayThinking } from './request.js';
export { mergeAnthropicUsage, usageFromAnthropicCounters, type AnthropicUsageCounters } from './usage.js';
export { ThinkingBlockFilter, thinkingRequested, withoutThinking } from './thinking-shown.js';
export { COST_NEUTRAL_BETAS, refuseUnpriced, serverTools, unpricedBetas } from './priced-features.js';
