// Structured JSON logs (pino), one line per finished request plus whatever the gateway logs itself.
//
// Secrets: credential-carrying fields are removed by pino's path redaction, and, as a last line of
// defence for text we do not control (an upstream's error message echoing a key, a stack trace),
// every line is scrubbed of anything that looks like an API key (`sk-…`, and the other providers'
// shapes: `AIza…`, `xai-…`, `gsk_…`) or a bearer token before it is written. Request lines are built from a fixed list of fields, so nothing else slips in.
//
// Written as they happen: the default destination writes each line to stdout synchronously (one
// write(2) per line, a few microseconds), so the lines of the requests before a crash or a SIGKILL are
// never lost in a buffer, as they were with the earlier 4 KB asynchronous buffer. `flush()` stays for
// destinations that do buffer.
import { pino } from 'pino';
import type { DestinationStream, Level, Logger } from 'pino';
import type { Micros } from '../catalog/snapshot.js';
import { UPSTREAM_FORMAT_NAMES, upstreamFormat } from '../formats/index.js';
import { KEY_BODY, OTHER_PROVIDER_KEY_PREFIXES } from '../wire/upstream-message.js';

export const REDACTED = '[REDACTED]';

/** Field paths removed from every log object (pino/fast-redact syntax; wildcards cover one level). */
export const REDACT_PATHS: readonly string[] = [
  'authorization',
  'Authorization',
  '["x-api-key"]',
  'apiKey',
  'api_key',
  'secret',
  'password',
  'headers.authorization',
  'headers.Authorization',
  'headers["x-api-key"]',
  'headers.cookie',
  '*.authorization',
  '*.Authorization',
  '*["x-api-key"]',
  '*.apiKey',
  '*.api_key',
  '*.secret',
  '*.headers.authorization',
  '*.headers.Authorization',
  '*.headers["x-api-key"]',
  '*.headers.cookie',
  // The header each upstream format sends its credential in (Gemini's x-goog-api-key), wherever logged.
  ...[...new Set(UPSTREAM_FORMAT_NAMES.map((f) => upstreamFormat(f).defaultCredentialsHeader))]
    .filter((h) => h !== 'authorization' && h !== 'x-api-key')
    .flatMap((h) => [`["${h}"]`, `headers["${h}"]`, `*["${h}"]`, `*.headers["${h}"]`]),
];

// Our keys look like `sk-<marker>-<random>`, upstream keys like `sk-proj-…` or `sk-ant-…`; six or more
// key characters after a word-boundary `sk-` (so "task-list" and the like are left alone).
const KEY_PATTERN = /\bsk-[A-Za-z0-9_-]{6,}/g;
const BEARER_PATTERN = /\b(Bearer)\s+[^\s",\\]+/gi;
// Other providers' key shapes (Google's `AIza…`, xAI, Groq): `sk-` ones are caught above.
const OTHER_KEY_PATTERN = new RegExp(`\\b(?:${OTHER_PROVIDER_KEY_PREFIXES.join('|')})${KEY_BODY}`, 'g');

/** Replaces anything that looks like an API key or a bearer token. */
export function scrubSecrets(line: string): string {
  // `includes` first: most lines contain neither, and a substring search is cheaper than a regex.
  if (line.includes('sk-')) line = line.replace(KEY_PATTERN, `sk-${REDACTED}`);
  if (line.includes('earer')) line = line.replace(BEARER_PATTERN, `$1 ${REDACTED}`);
  if (OTHER_PROVIDER_KEY_PREFIXES.some((p) => line.includes(p))) line = line.replace(OTHER_KEY_PATTERN, REDACTED);
  return line;
}

/** Longest client-supplied value in a request line (a model id is at most a few dozen characters). */
export const MAX_REQUEST_FIELD_CHARS = 256;
/** Longest string field of any other log line (error texts included). */
export const MAX_LOG_FIELD_CHARS = 2048;

/**
 * `value` cut to `max` characters, saying how much was cut: a client must not be able to make one log
 * line megabytes long (a 1 MB model name was logged whole).
 */
export function boundField(value: string, max: number): string {
  return value.length <= max ? value : `${value.slice(0, max)}…[${value.length - max} more characters]`;
}

/** Top-level string fields of a log object, bounded (pino's log formatter). */
function boundFields(obj: Record<string, unknown>): Record<string, unknown> {
  for (const k in obj) {
    const v = obj[k];
    if (typeof v === 'string' && v.length > MAX_LOG_FIELD_CHARS) obj[k] = boundField(v, MAX_LOG_FIELD_CHARS);
  }
  return obj;
}

export interface RequestLogEntry {
  requestId: string;
  keyId?: string;
  accountId?: string;
  model?: string;
  route: string;
  status: number;
  inputTokens?: number;
  outputTokens?: number;
  /** Cost charged, integer micro-USD. */
  cost?: Micros;
  latencyMs: number;
  errorCode?: string;
  /** Trace id of the request span, for jumping from a log line to its trace. */
  traceId?: string;
}

export interface LoggerOptions {
  /** Default: LOG_LEVEL, else `info`. */
  level?: string;
  /** Where lines go. Default: stdout, written synchronously line by line. */
  destination?: DestinationStream;
  /** Fixed fields on every line. */
  base?: Record<string, string>;
}

export interface TollgateLogger {
  /** The pino logger, for everything other than request lines (redaction applies). */
  readonly log: Logger;
  logRequest(entry: RequestLogEntry): void;
  /** Whether the line of a request that ended with `status` is written at the current level (5xx at warn, others at info). */
  logsRequest(status: number): boolean;
  /** Writes out buffered lines. */
  flush(): Promise<void>;
}

const LEVELS: ReadonlySet<string> = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

function levelOf(value: string | undefined): Level | 'silent' {
  const v = value?.trim().toLowerCase();
  return v !== undefined && LEVELS.has(v) ? (v as Level | 'silent') : 'info';
}

export function createLogger(options: LoggerOptions = {}): TollgateLogger {
  const destination =
    options.destination ?? pino.destination({ dest: 1, sync: true });
  const common = {
    level: levelOf(options.level ?? process.env.LOG_LEVEL),
    base: options.base ?? { service: 'tollgate-gateway' },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: { streamWrite: scrubSecrets },
  };
  const log = pino({ ...common, redact: { paths: [...REDACT_PATHS], censor: REDACTED }, formatters: { log: boundFields } }, destination);
  // Request lines are built below from a fixed list of fields, none of which can hold a credential, so
  // they skip path redaction (about 5% of the gateway's CPU under load when profiled); the scrub
  // still runs on every line. Both loggers share the destination, so lines stay in order.
  const requestLog = pino(common, destination);

  return {
    log,
    logRequest(e: RequestLogEntry): void {
      // An explicit object: only these fields are ever logged for a request.
      const line = {
        requestId: e.requestId,
        keyId: e.keyId,
        accountId: e.accountId,
        model: e.model === undefined ? undefined : boundField(e.model, MAX_REQUEST_FIELD_CHARS),
        route: e.route,
        status: e.status,
        inputTokens: e.inputTokens,
        outputTokens: e.outputTokens,
        costMicroUsd: e.cost,
        latencyMs: e.latencyMs,
        errorCode: e.errorCode === undefined ? undefined : boundField(e.errorCode, MAX_REQUEST_FIELD_CHARS),
        traceId: e.traceId,
      };
      if (e.status >= 500) requestLog.warn(line, 'request');
      else requestLog.info(line, 'request');
    },
    logsRequest(status: number): boolean {
      return requestLog.isLevelEnabled(status >= 500 ? 'warn' : 'info');
    },
    flush(): Promise<void> {
      return new Promise((resolve) => log.flush(() => resolve()));
    },
  };
}
