// An upstream's own error text, as it may be shown to a client: credentials it echoes redacted, and cut
// short. Every relayed upstream message goes through here (status errors, in-band stream errors, both
// formats, both directions).
const MAX_MESSAGE = 1000;
// Keys and bearer tokens an upstream may echo back ("Incorrect API key provided: sk-…").
const CREDENTIAL = /\b(?:sk|pk|rk|tg|key)[-_][A-Za-z0-9_-]{8,}|\bBearer\s+\S+|\bx-api-key:\s*\S+/gi;

export function redactCredentials(message: string): string {
  return message.replace(CREDENTIAL, '[redacted]');
}

export function relayableUpstreamMessage(message: string): string {
  // Cut first (with room for a credential straddling the cut), so a huge message costs no more than a short one.
  return redactCredentials(message.slice(0, MAX_MESSAGE * 2)).slice(0, MAX_MESSAGE);
}
