/**
 * Reasoning from an OpenAI-format upstream has no Anthropic signature; Anthropic clients still need
 * one to echo the block back. Gateway-made signatures are marked so they are never sent to a real
 * Anthropic upstream (which would answer 400 "invalid signature").
 */
const PREFIX = 'tollgate:';

export function gatewaySignature(requestId: string): string {
  return `${PREFIX}${Buffer.from(requestId).toString('base64url')}`;
}

/** True when a signature is one Anthropic itself produced (not empty, not ours). */
export function isAnthropicSignature(signature: string | undefined): signature is string {
  return typeof signature === 'string' && signature !== '' && !signature.startsWith(PREFIX);
}
