// Upstream health probe: GET the upstream's model list with its credential, within a timeout.
// An OpenAI-format base already ends in /v1 (GET {base}/models); an Anthropic-format base does not
// (GET {base}/v1/models). The credential never appears in the result message.
import type { WireFormat } from '../src/wire/format.js';

export interface ProbeTarget {
  baseUrl: string;
  format: WireFormat;
  credential?: string;
  credentialsHeader?: 'authorization' | 'x-api-key';
}

export interface ProbeResult {
  healthy: boolean;
  latencyMs: number;
  message: string;
}

export function modelsUrl(baseUrl: string, format: WireFormat): string {
  const base = baseUrl.replace(/\/+$/, '');
  return format === 'anthropic' ? `${base}/v1/models` : `${base}/models`;
}

export function probeHeaders(target: ProbeTarget): Record<string, string> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (target.format === 'anthropic') headers['anthropic-version'] = '2023-06-01';
  if (target.credential) {
    const header = target.credentialsHeader ?? (target.format === 'anthropic' ? 'x-api-key' : 'authorization');
    headers[header] = header === 'authorization' ? `Bearer ${target.credential}` : target.credential;
  }
  return headers;
}

export async function probeUpstream(target: ProbeTarget, timeoutMs: number): Promise<ProbeResult> {
  const url = modelsUrl(target.baseUrl, target.format);
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);
  try {
    const res = await fetch(url, { headers: probeHeaders(target), signal: AbortSignal.timeout(timeoutMs) });
    // Drain the body so the connection is reusable; its content is not needed.
    await res.arrayBuffer().catch(() => undefined);
    if (res.ok) return { healthy: true, latencyMs: elapsed(), message: `GET ${url}: ${res.status}` };
    return { healthy: false, latencyMs: elapsed(), message: `GET ${url}: HTTP ${res.status}` };
  } catch (err) {
    const e = err as { name?: string; cause?: { code?: string; message?: string } };
    const reason =
      e.name === 'TimeoutError' || e.name === 'AbortError'
        ? `no response within ${timeoutMs} ms`
        : (e.cause?.code ?? e.cause?.message ?? 'request failed');
    return { healthy: false, latencyMs: elapsed(), message: `GET ${url}: ${reason}` };
  }
}
