// An Anthropic-format upstream: its base URL is the bare origin (https://api.anthropic.com), the key
// goes in x-api-key, and every call names an API version; a client speaking Anthropic keeps its own
// version and beta flags, anyone else gets the version the translators are written against.
import { nestedErrorMessage, type UpstreamFormat } from './types.js';

export const ANTHROPIC_VERSION = '2023-06-01';

export const anthropicUpstream: UpstreamFormat = {
  format: 'anthropic',
  chatPath: (basePath) => `${basePath}/v1/messages`,
  modelsPath: (basePath) => `${basePath}/v1/models`,
  defaultCredentialsHeader: 'x-api-key',
  protocolHeaders: (client) => {
    const beta = client?.['anthropic-beta'];
    return { 'anthropic-version': client?.['anthropic-version'] ?? ANTHROPIC_VERSION, ...(beta === undefined ? {} : { 'anthropic-beta': beta }) };
  },
  // {"type": "error", "error": {"type", "message"}}
  errorMessage: nestedErrorMessage,
};
