// Upstream health probe: GET the upstream's model list with its credential, within a timeout. Where
// the list is and which headers a call needs come from the upstream's format module, as for the
// gateway's own calls. The credential never appears in the result message.
import { credentialHeaders, upstreamFormat, type UpstreamFormatName } from '../src/formats/index.js';

export interface ProbeTarget {
  baseUrl: string;
  format: UpstreamFormatName;
  credential?: string;
  credentialsHeader?: string;
}

export interface ProbeResult {
  healthy: boolean;
  latencyMs: number;
  message: string;
}

export function modelsUrl(baseUrl: string, format: UpstreamFormatName): string {
  return upstreamFormat(format).modelsPath(baseUrl.replace(/\/+$/, ''));
}

export function probeHeaders(target: ProbeTarget): Record<string, string> {
  const format = upstreamFormat(target.format);
  return {
    accept: 'application/json',
    ...format.protocolHeaders(),
    ...(target.credential ? credentialHeaders(target.credentialsHeader ?? format.defaultCredentialsHeader, target.credential) : {}),
  };
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
