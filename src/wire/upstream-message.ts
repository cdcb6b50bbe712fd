// An upstream's own error text, as it may be shown to a client: credentials it echoes redacted, and cut
// short. Every relayed upstream message goes through here (status errors, in-band stream errors, both
// formats, both directions). The credentials the gateway itself sent are removed before this, from the
// whole body, whatever their shape (src/upstream/redacted-body.ts); these patterns are the fallback for
// keys it did not send (another key the upstream names, one a client pasted into its prompt).
const MAX_MESSAGE = 1000;

/** Prefixes of the keys of providers whose keys do not start `sk-`: Google (`AIza…`), xAI, Groq. */
export const OTHER_PROVIDER_KEY_PREFIXES: readonly string[] = ['AIza', 'xai-', 'gsk_'];
/** What follows a key's prefix: eight or more key characters, so words like "task-list" stay. */
export const KEY_BODY = '[A-Za-z0-9_-]{8,}';
/**
 * API keys by shape: OpenAI `sk-…`/`sk-proj-…`, Anthropic `sk-ant-…`, Tollgate `sk-tg-…`, generic `pk-`,
 * `rk-`, `key-` ones, and the other providers' prefixes.
 */
const PROVIDER_KEY = `\\b(?:(?:sk|pk|rk|tg|key)[-_]|${OTHER_PROVIDER_KEY_PREFIXES.join('|')})${KEY_BODY}`;
// Keys, bearer tokens and credential headers an upstream may echo back ("Incorrect API key provided: sk-…").
const CREDENTIAL = new RegExp(`${PROVIDER_KEY}|\\bBearer\\s+\\S+|\\b(?:x-api-key|x-goog-api-key|api-key):\\s*\\S+|[?&]key=[^&\\s"']+`, 'gi');

export function redactCredentials(message: string): string {
  return message.replace(CREDENTIAL, '[redacted]');
}

export function relayableUpstreamMessage(message: string): string {
  // Cut first (with room for a credential straddling the cut), so a huge message costs no more than a short one.
  return redactCredentials(message.slice(0, MAX_MESSAGE * 2)).slice(0, MAX_MESSAGE);
}
