// The upstream format modules: what every caller (dispatchers, exchange, routes, the operator's probe)
// now takes from one place.
import { describe, expect, it } from 'vitest';
import { credentialHeaders, upstreamFormat } from '../../src/formats/index.js';
import { ANTHROPIC_VERSION } from '../../src/formats/anthropic-messages/index.js';
import { modelsUrl, probeHeaders } from '../../operator/probe.js';

describe('upstream formats', () => {
  it('place the chat endpoint and the model list under the base path each format expects', () => {
    expect(upstreamFormat('openai').chatPath('/v1', 'gpt-x', false)).toBe('/v1/chat/completions');
    expect(upstreamFormat('openai').modelsPath('/v1')).toBe('/v1/models');
    expect(upstreamFormat('anthropic').chatPath('', 'claude-x', true)).toBe('/v1/messages');
    expect(upstreamFormat('anthropic').modelsPath('/proxy')).toBe('/proxy/v1/models');
    expect(modelsUrl('https://api.openai.com/v1/', 'openai')).toBe('https://api.openai.com/v1/models');
    expect(modelsUrl('https://api.anthropic.com', 'anthropic')).toBe('https://api.anthropic.com/v1/models');
  });

  it('send the credential as its header wants it', () => {
    expect(credentialHeaders('authorization', 'sk-1')).toEqual({ authorization: 'Bearer sk-1' });
    expect(credentialHeaders('x-api-key', 'sk-1')).toEqual({ 'x-api-key': 'sk-1' });
    expect(upstreamFormat('openai').defaultCredentialsHeader).toBe('authorization');
    expect(upstreamFormat('anthropic').defaultCredentialsHeader).toBe('x-api-key');
  });

  it("name Anthropic's API version: the client's own when it speaks Anthropic (with its beta flags), else the default", () => {
    const anthropic = upstreamFormat('anthropic');
    expect(anthropic.protocolHeaders()).toEqual({ 'anthropic-version': ANTHROPIC_VERSION });
    expect(anthropic.protocolHeaders({ 'anthropic-version': '2024-01-01', 'anthropic-beta': 'tools-2024' })).toEqual({
      'anthropic-version': '2024-01-01',
      'anthropic-beta': 'tools-2024',
    });
    expect(upstreamFormat('openai').protocolHeaders({ 'anthropic-version': '2024-01-01' })).toEqual({});
  });

  it("give the operator's probe the same headers the gateway's calls carry", () => {
    expect(probeHeaders({ baseUrl: 'https://a', format: 'anthropic', credential: 'k' })).toEqual({ accept: 'application/json', 'anthropic-version': ANTHROPIC_VERSION, 'x-api-key': 'k' });
    expect(probeHeaders({ baseUrl: 'https://o/v1', format: 'openai', credential: 'k' })).toEqual({ accept: 'application/json', authorization: 'Bearer k' });
    expect(probeHeaders({ baseUrl: 'https://o/v1', format: 'openai', credential: 'k', credentialsHeader: 'x-api-key' })).toEqual({ accept: 'application/json', 'x-api-key': 'k' });
  });

  it('read the message of each format\'s own error body, and nothing from a body that is not one', () => {
    expect(upstreamFormat('openai').errorMessage(JSON.stringify({ error: { message: 'Invalid value for max_tokens', type: 'invalid_request_error', param: 'max_tokens', code: null } }))).toBe('Invalid value for max_tokens');
    expect(upstreamFormat('anthropic').errorMessage(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: too large' } }))).toBe('max_tokens: too large');
    for (const format of ['openai', 'anthropic'] as const) {
      expect(upstreamFormat(format).errorMessage('<html>Bad Gateway</html>')).toBeUndefined();
      expect(upstreamFormat(format).errorMessage('null')).toBeUndefined();
      expect(upstreamFormat(format).errorMessage(JSON.stringify({ error: 'plain string' }))).toBeUndefined();
      expect(upstreamFormat(format).errorMessage(JSON.stringify({ error: { message: 42 } }))).toBeUndefined();
    }
  });
});
