// OpenAI chat completions, as a client format and as an upstream format. What other folders may use.
export { openaiChatClient } from './client.js';
export { openaiChatUpstream } from './upstream.js';
export { collectOpenAIChoice } from './generated.js';
export { encodeOpenAIRequest } from './request.js';
export { usageFromOpenAI } from './usage.js';
