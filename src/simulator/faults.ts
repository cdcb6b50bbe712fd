// Injected faults: each spec applies to the next `times` matching requests, then it is removed.

export interface FaultSpec {
  match?: { model?: string; path?: string };
  /** How many matching requests it applies to (default 1); 0 or less = until cleared. */
  times?: number;
  /** Reply with this status and an error body in the endpoint's format (500, 503, 429, 529, ...). */
  status?: number;
  /** Optional message for the error body / in-band error event. */
  message?: string;
  /** Wait this long before the response headers. */
  delayMs?: number;
  /** Stream: destroy the socket after N SSE events (non-stream: destroy without a reply). */
  cutAfterChunks?: number;
  /** Stream: after N events send a `data: {not json` line, then carry on. */
  malformedAfterChunks?: number;
  /** Never answer (the socket stays open until the client gives up). */
  hang?: boolean;
  /** Stream: after N events send an in-band error event and end the response. */
  errorEventAfterChunks?: number;
  /** Per-request pacing overrides. */
  firstTokenDelayMs?: number;
  tokenDelayMs?: number;
  /**
   * Hold a successful reply `stallMs` (default 10 s) once the upstream has accepted the request (its 2xx
   * headers sent), then carry on: 'headers' before any body byte, 'mid-body' with the first half of a
   * whole reply's body sent. The request's `stalled` is true meanwhile, for a test to act on.
   */
  stallAt?: 'headers' | 'mid-body';
  /** Stream: hold `stallMs` before the next token once N events are out (a stream's events are chunks). */
  stallAfterChunks?: number;
  stallMs?: number;
  /** A whole reply: drop the connection once its headers and the first half of its body are out. */
  cutMidBody?: boolean;
}

const NUMERIC_FIELDS = [
  'times',
  'status',
  'delayMs',
  'cutAfterChunks',
  'malformedAfterChunks',
  'errorEventAfterChunks',
  'firstTokenDelayMs',
  'tokenDelayMs',
  'stallAfterChunks',
  'stallMs',
] as const;

/** The largest delay (ms) or count a fault may carry: about 17 minutes, or a million chunks. */
const MAX_FAULT_NUMBER = 1_000_000;

/** Validates a fault received over HTTP; returns an error message or the spec. */
export function parseFault(value: unknown): FaultSpec | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'fault must be a JSON object';
  const v = value as Record<string, unknown>;
  for (const f of NUMERIC_FIELDS) {
    if (v[f] !== undefined && (typeof v[f] !== 'number' || !Number.isFinite(v[f]))) return `${f} must be a number`;
    // Bounded, so a fault can neither hold a socket for days nor count past what a stream can send.
    if (typeof v[f] === 'number' && Math.abs(v[f]) > MAX_FAULT_NUMBER) return `${f} must be at most ${MAX_FAULT_NUMBER}`;
  }
  if (v.status !== undefined && ((v.status as number) < 400 || (v.status as number) > 599)) {
    return 'status must be between 400 and 599';
  }
  if (v.hang !== undefined && typeof v.hang !== 'boolean') return 'hang must be a boolean';
  if (v.cutMidBody !== undefined && typeof v.cutMidBody !== 'boolean') return 'cutMidBody must be a boolean';
  if (v.stallAt !== undefined && v.stallAt !== 'headers' && v.stallAt !== 'mid-body') return 'stallAt must be "headers" or "mid-body"';
  if (v.message !== undefined && typeof v.message !== 'string') return 'message must be a string';
  if (v.match !== undefined) {
    const m = v.match as Record<string, unknown> | null;
    if (typeof m !== 'object' || m === null) return 'match must be an object';
    if (m.model !== undefined && typeof m.model !== 'string') return 'match.model must be a string';
    if (m.path !== undefined && typeof m.path !== 'string') return 'match.path must be a string';
  }
  return v as FaultSpec;
}

interface Entry {
  spec: FaultSpec;
  left: number;
}

export class FaultBook {
  private entries: Entry[] = [];

  add(spec: FaultSpec): void {
    const times = spec.times ?? 1;
    this.entries.push({ spec, left: times <= 0 ? Number.POSITIVE_INFINITY : times });
  }

  clear(): void {
    this.entries = [];
  }

  get size(): number {
    return this.entries.length;
  }

  /** The first fault matching this request, consuming one use of it. */
  take(path: string, model: string | undefined): FaultSpec | undefined {
    if (this.entries.length === 0) return undefined;
    const i = this.entries.findIndex(
      (e) =>
        (e.spec.match?.path === undefined || e.spec.match.path === path) &&
        (e.spec.match?.model === undefined || e.spec.match.model === model),
    );
    const e = this.entries[i];
    if (!e) return undefined;
    if (--e.left <= 0) this.entries.splice(i, 1);
    return e.spec;
  }
}
