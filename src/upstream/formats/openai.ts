// An OpenAI-format upstream: its base URL already ends in /v1 (https://api.openai.com/v1), the key is
// a Bearer token, and no version header is needed.
import { nestedErrorMessage, type UpstreamFormat } from './types.js';

export const openaiUpstream: UpstreamFormat = {
  format: 'openai',
  chatPath: (basePath) => `${basePath}/chat/completions`,
  modelsPath: (basePath) => `${basePath}/models`,
  defaultCredentialsHeader: 'authorization',
  protocolHeaders: () => ({}),
  // {"error": {"message", "type", "param", "code"}}
  errorMessage: nestedErrorMessage,
};
